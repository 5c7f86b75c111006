import Foundation
internal import LarderS3

/// Blobs as objects of one bucket in an S3-compatible store, keyed `sha256/ab/cd/<hex>`.
///
/// The only file of `Larder` that knows S3: the rest of the store sees ``BlobBackend``. Every
/// PUT carries the content's SHA-256 as `x-amz-content-sha256`, so the store itself refuses
/// bytes that do not match their address; content over 16 MiB goes up in parts. Errors are the
/// S3 client's typed `S3Error` (its `isTransient` tells a 503-and-retry from a refusal).
public struct S3BlobBackend: BlobBackend {
  private let client: S3Client

  /// Connects to the bucket named by `url` (`s3://BUCKET?endpoint=…&region=…&path-style=1`),
  /// with credentials from `credentialsFile` when given, else from `AWS_ACCESS_KEY_ID` and
  /// `AWS_SECRET_ACCESS_KEY` in `environment`. Nothing is sent until the first call.
  ///
  /// - Throws: a configuration error naming what is wrong with the URL or the credentials.
  public init(
    url: String, credentialsFile: String? = nil,
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) throws {
    client = S3Client(
      configuration: try S3Configuration(url: url),
      credentials: try S3Credentials.resolve(file: credentialsFile, environment: environment))
  }

  public var location: String {
    let c = client.configuration
    return "s3://\(c.bucket)?endpoint=\(c.endpoint)&region=\(c.region)&path-style=\(c.pathStyle ? 1 : 0)"
  }

  /// An upload: it runs before the write transaction, never under the write lock.
  public var publishesInsideTransaction: Bool { false }

  public func publish(_ staged: StagedBlob) throws {
    try client.putFile(
      atPath: staged.path, key: BlobAddress.key(forHex: staged.sha256Hex), sha256Hex: staged.sha256Hex)
  }

  public func storedSize(ofBlob hex: String) throws -> Int64? {
    try client.head(BlobAddress.key(forHex: hex))?.size
  }

  public func read(blob hex: String, range: Range<Int64>?, _ body: (UnsafeRawBufferPointer) throws -> Void)
    throws
  {
    if let range, range.isEmpty { return }
    do {
      try client.get(
        BlobAddress.key(forHex: hex), range: range.map { $0.lowerBound...($0.upperBound - 1) }, body: body)
    } catch let error as S3Error where error.status == 416 {
      // A range wholly past the end: nothing, as a file read clamps it (the blob's existence is
      // not in doubt: S3 answers 404, not 416, for a missing key).
    }
  }

  public func remove(blob hex: String) throws {
    try client.delete(BlobAddress.key(forHex: hex))
  }

  public func forEachStoredBlob(_ body: (_ hex: String, _ size: Int64) throws -> Void) throws {
    try client.list(prefix: "sha256/") { object in
      if let hex = BlobAddress.hex(ofKey: object.key) { try body(hex, object.size) }
    }
  }
}
