import Foundation

/// Where a store keeps its committed bytes: files under the data directory (the default), or
/// a bucket of an S3-compatible store that several nodes share.
///
/// ```swift
/// let blobs = try BlobLocation(parsing: "s3://media?endpoint=http://127.0.0.1:18080&path-style=1")
/// let larder = try Larder(at: dataURL, configuration: .init(catalog: .postgres(url), blobs: blobs))
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

  /// The blobs a store in `directory` uses when none is configured: its data directory, unless
  /// the test hook `LARDER_TEST_BLOBS` names a bucket. Then the store gets a key prefix of its
  /// own named after the directory (as `LARDER_TEST_CATALOG` gives it a schema), so every
  /// test's store is fresh and a `larder` process started on that directory finds its bytes.
  static func defaultLocation(for directory: URL) -> BlobLocation {
    guard let base = ProcessInfo.processInfo.environment["LARDER_TEST_BLOBS"], base.hasPrefix("s3://") else {
      return .dataDirectory
    }
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a of the standardised path
    for byte in directory.standardizedFileURL.path.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    let separator = base.contains("?") ? "&" : "?"
    return .s3(url: base + separator + "prefix=t_" + String(hash, radix: 16), credentialsFile: nil)
  }

  public var isS3: Bool {
    if case .s3 = self { return true }
    return false
  }

  public var description: String {
    switch self {
    case .dataDirectory: "filesystem (data directory)"
    case .s3(let url, _): url
    }
  }
}
