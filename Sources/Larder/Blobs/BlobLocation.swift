import Foundation

/// Where a store keeps its committed bytes: files under the data directory (the default), or
/// a bucket of an S3-compatible store that several nodes share.
///
/// ```swift
/// let blobs = try BlobLocation(parsing: "s3://media?endpoint=http://127.0.0.1:18080&path-style=1")
/// let larder = try Larder(at: dataURL, configuration: .init(catalog: .postgres(url), blobs: blobs, backends: [.postgres, .s3]))
/// ```
/// Credentials are never part of the URL: they come from `AWS_ACCESS_KEY_ID` and
/// `AWS_SECRET_ACCESS_KEY`, or from the file named by `credentialsFile`. A `prefix` query
/// setting keeps several stores in one bucket (keys `<prefix>/sha256/ab/cd/<hex>`).
public enum BlobLocation: Sendable, Equatable, CustomStringConvertible {
  /// `blobs/` in the data directory.
  case dataDirectory
  /// An `s3://BUCKET?endpoint=…&region=…&path-style=1[&prefix=P]` URL, and where its
  /// credentials are when not in the environment.
  case s3(url: String, credentialsFile: String?)

  /// Parses an `s3://` URL, or `filesystem` (or nothing) for the data directory.
  /// - Throws: ``LarderError/invalidArgument(_:)`` naming what is wrong.
  public init(parsing text: String, credentialsFile: String? = nil) throws {
    if text.isEmpty || text == "filesystem" {
      self = .dataDirectory
      return
    }
    guard text.hasPrefix("s3://") else {
      throw LarderError.invalidArgument("blobs are an s3:// URL or 'filesystem', not '\(text.prefix(80))'")
    }
    self = .s3(url: text, credentialsFile: credentialsFile)
  }

  public var description: String {
    switch self {
    case .dataDirectory: "filesystem (data directory)"
    case .s3(let url, _): url
    }
  }
}
