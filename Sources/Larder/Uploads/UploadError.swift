import Foundation

/// Why an upload operation was refused, with a stable ``code``; the HTTP layer picks statuses.
public enum UploadError: Error, Sendable, Equatable, CustomStringConvertible {
  /// No such upload, or it belongs to someone else (existence is not revealed).
  case notFound(id: String)
  /// It expired; the collector will reclaim it.
  case expired(id: String)
  /// Another append to the same upload is in progress.
  case locked(id: String)
  /// The client's offset is not the upload's.
  case offsetMismatch(expected: Int64, actual: Int64)
  /// The bytes would go past the upload's length.
  case exceedsLength(length: Int64)
  /// A length was given for an upload whose length is already known, or is smaller than its offset.
  case invalidLength(String)
  /// Appends to a final (concatenated) upload are not allowed.
  case finalNotAppendable(id: String)
  /// A partial upload named in a concatenation is unusable.
  case invalidConcatenation(String)
  /// The chunk's checksum did not match; it was discarded.
  case checksumMismatch(algorithm: String)
  /// The partial bytes on disk are shorter than the recorded offset (someone removed them).
  case dataLost(id: String)
  /// The store assembled other bytes than the parts this upload sent (its ETag or a part's
  /// does not match their MD5s): the upload is deleted rather than published wrong.
  case assemblyMismatch(id: String)

  public var code: String {
    switch self {
    case .notFound: "upload-not-found"
    case .expired: "upload-expired"
    case .locked: "upload-locked"
    case .offsetMismatch: "offset-mismatch"
    case .exceedsLength: "exceeds-length"
    case .invalidLength: "invalid-length"
    case .finalNotAppendable: "final-not-appendable"
    case .invalidConcatenation: "invalid-concatenation"
    case .checksumMismatch: "checksum-mismatch"
    case .dataLost: "upload-data-lost"
    case .assemblyMismatch: "upload-assembly-mismatch"
    }
  }

  public var description: String {
    switch self {
    case .notFound(let id): "upload \(id.prefix(64)) not found"
    case .expired(let id): "upload \(id.prefix(64)) has expired"
    case .locked(let id): "upload \(id.prefix(64)) is being written by another request; retry"
    case .offsetMismatch(let expected, let actual):
      "Upload-Offset is \(actual) but the upload is at offset \(expected)"
    case .exceedsLength(let length): "the bytes go past the upload's length of \(length)"
    case .invalidLength(let message): message
    case .finalNotAppendable: "a final (concatenated) upload cannot be appended to"
    case .invalidConcatenation(let message): message
    case .checksumMismatch(let algorithm):
      "\(algorithm) checksum of the chunk does not match; the chunk was discarded"
    case .dataLost(let id): "the stored bytes of upload \(id.prefix(64)) are missing"
    case .assemblyMismatch(let id):
      "the store assembled upload \(id.prefix(64)) from other bytes than were received; it was deleted, start again"
    }
  }
}
