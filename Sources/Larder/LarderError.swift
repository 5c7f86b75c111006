import Foundation

/// Everything that can go wrong in the store, as values with a stable ``code``.
///
/// The HTTP layer maps each case to a status in exactly one place.
public enum LarderError: Error, Sendable, Equatable, CustomStringConvertible {
  case notFound(bucket: String, name: String)
  case fileNotFound(id: String)
  case invalidBucket(String, reason: String)
  case invalidName(String, reason: String)
  case invalidArgument(String)
  /// An event subscription or outbox event the store does not have (the message names it).
  case eventNotFound(String)
  /// An upload is larger than the limit it was given.
  case sizeLimitExceeded(limit: Int64)
  /// A download is larger than the caller's `maxSize`; nothing was read.
  case downloadSizeExceeded(size: Int64, maxSize: Int64)
  case checksumMismatch(algorithm: String, expected: String, actual: String)
  /// A conditional write found another generation than it expected.
  case preconditionFailed(String)
  case diskFull
  case io(operation: String, path: String, errno: Int32)
  case cancelled
  /// The blob behind this content failed verification and was quarantined (`larder verify
  /// --repair`): its bytes are damaged, and uploading the same bytes again (any name) heals it.
  case corruptContent(sha256: String)
  /// The catalog records this content but the blob store does not hold it (lost, or a store
  /// misconfigured to another blob store): `larder verify` reports it, and uploading the same
  /// bytes again heals it.
  case contentMissing(sha256: String, location: String)
  case catalogTooNew(version: Int, supported: Int)
  /// The blob store (S3) could not be reached or answered with an error: nothing was
  /// acknowledged, and the same request may succeed later (the HTTP layer says 503 and
  /// `Retry-After`). The detail names the operation, never credentials.
  case blobStoreUnavailable(String)

  /// A stable machine-readable code, e.g. `"not-found"`.
  public var code: String {
    switch self {
    case .notFound, .fileNotFound, .eventNotFound: "not-found"
    case .invalidBucket: "invalid-bucket"
    case .invalidName: "invalid-name"
    case .invalidArgument: "invalid-argument"
    case .sizeLimitExceeded: "size-limit-exceeded"
    case .downloadSizeExceeded: "download-size-exceeded"
    case .checksumMismatch: "checksum-mismatch"
    case .preconditionFailed: "precondition-failed"
    case .diskFull: "disk-full"
    case .io: "io-error"
    case .cancelled: "cancelled"
    case .corruptContent: "corrupt-content"
    case .contentMissing: "content-missing"
    case .catalogTooNew: "catalog-too-new"
    case .blobStoreUnavailable: "blob-store-unavailable"
    }
  }

  public var description: String {
    switch self {
    case .notFound(let bucket, let name): "object '\(name)' not found in bucket '\(bucket)'"
    case .fileNotFound(let id): "file \(id) not found"
    case .invalidBucket(let bucket, let reason): "invalid bucket name '\(bucket.prefix(100))': \(reason)"
    case .invalidName(let name, let reason): "invalid object name '\(name.prefix(100))': \(reason)"
    case .invalidArgument(let message): message
    case .eventNotFound(let message): message
    case .sizeLimitExceeded(let limit): "content is larger than the limit of \(limit) bytes"
    case .downloadSizeExceeded(let size, let maxSize):
      "content is \(size) bytes, larger than the maximum of \(maxSize) bytes allowed for this download"
    case .checksumMismatch(let algorithm, let expected, let actual):
      "\(algorithm) checksum mismatch: expected \(expected), content has \(actual)"
    case .preconditionFailed(let message): message
    case .diskFull: "no space left on the storage device"
    case .io(let operation, let path, let errno):
      "\(operation) failed for \(path): \(String(cString: strerror(errno)))"
    case .cancelled: "the operation was cancelled"
    case .corruptContent(let sha256):
      "the stored content of this object (\(sha256)) is damaged: it failed verification and was quarantined; upload the object's original bytes again to heal it"
    case .contentMissing(let sha256, let location):
      "stored content \(sha256) is missing from the blob store \(location) (run `larder verify`; uploading the same bytes again heals it)"
    case .catalogTooNew(let version, let supported):
      "the catalog has schema version \(version) but this Larder supports up to \(supported)"
    case .blobStoreUnavailable(let detail): "the blob store is unavailable: \(detail)"
    }
  }

  /// Builds the error for a failed system call, recognising a full disk.
  static func posix(_ operation: String, _ path: String, _ code: Int32 = errno) -> LarderError {
    if code == ENOSPC || code == EDQUOT { return .diskFull }
    return .io(operation: operation, path: path, errno: code)
  }
}
