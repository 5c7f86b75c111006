import Foundation

/// An access key and its secret, from the environment or a credentials file, never from a
/// command line (which `ps` shows to every user).
public struct S3Credentials: Sendable, Equatable {
  public var accessKeyID: String
  public var secretAccessKey: String
  /// `AWS_SESSION_TOKEN`, for temporary credentials; sent as `x-amz-security-token`.
  public var sessionToken: String?

  public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
    self.accessKeyID = accessKeyID
    self.secretAccessKey = secretAccessKey
    self.sessionToken = sessionToken
  }

  /// From `file` when given, else from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`
  /// (and `AWS_SESSION_TOKEN`) in `environment`.
  ///
  /// - Throws: ``S3ConfigurationError`` when neither source has both values.
  public static func resolve(
    file: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment
  ) throws -> S3Credentials {
    if let file { return try load(file: file, profile: environment["AWS_PROFILE"] ?? "default") }
    guard let id = environment["AWS_ACCESS_KEY_ID"], !id.isEmpty,
      let secret = environment["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty
    else {
      throw S3ConfigurationError(
        "S3 credentials missing: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name a credentials file")
    }
    let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
    return S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: token)
  }

  /// Reads an AWS-style credentials file: `name = value` lines (`aws_access_key_id`,
  /// `aws_secret_access_key`, `aws_session_token`), at the top or in the `[profile]` section;
  /// `#`/`;` comments. `KEY=VALUE` lines with the environment variables' names work too.
  ///
  /// - Throws: ``S3ConfigurationError`` when the file cannot be read or lacks a value.
  public static func load(file: String, profile: String = "default") throws -> S3Credentials {
    guard let data = FileManager.default.contents(atPath: file) else {
      throw S3ConfigurationError("cannot read the S3 credentials file \(file)")
    }
    var section: String? = nil
    var values: [String: String] = [:]
    for raw in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
      let line = raw.trimmingCharacters(in: .whitespaces)
      if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
      if line.hasPrefix("[") && line.hasSuffix("]") {
        section = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
        continue
      }
      guard section == nil || section == profile || section == "profile \(profile)",
        let eq = line.firstIndex(of: "=")
      else { continue }
      let name = line[..<eq].trimmingCharacters(in: .whitespaces).lowercased()
      values[name] = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
    }
    guard let id = values["aws_access_key_id"], !id.isEmpty,
      let secret = values["aws_secret_access_key"], !secret.isEmpty
    else {
      throw S3ConfigurationError(
        "\(file) lacks aws_access_key_id or aws_secret_access_key for profile '\(profile)'")
    }
    return S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: values["aws_session_token"])
  }
}
