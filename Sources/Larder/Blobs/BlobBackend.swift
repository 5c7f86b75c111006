import Foundation

/// Where committed content lives: the seam between the store and its bytes.
///
/// Two implementations: ``FilesystemBlobBackend`` (the data directory's `blobs/`, the
/// embedded default) and ``S3BlobBackend`` (a bucket of an S3-compatible store, for several
/// nodes sharing one store). Both address content the same way, `sha256/ab/cd/<64 hex>`, and
/// neither decides whether a blob *exists*: the catalog's `blobs` row does, inside the write
/// transaction (ARCHITECTURE §3). The backend only holds bytes.
///
/// The contract, which the write path, gc and verify rely on:
/// - ``publish(_:)`` makes verified staged content durable at its address before the commit
///   that inserts its row (I1: a row exists ⇒ its bytes exist). Publishing the same content
///   again is harmless: the address is the content.
/// - ``read(blob:range:_:)`` streams with bounded memory, never the whole blob at once.
/// - ``remove(blob:)`` of an absent blob succeeds, so an interrupted collector can run again.
/// - ``forEachStoredBlob(_:)`` visits every stored address page by page (gc's stray check,
///   verify's "every row has its bytes"), in bounded memory however many blobs there are.
///
/// ```swift
/// let backend: any BlobBackend = try S3BlobBackend(url: "s3://larder?endpoint=http://127.0.0.1:18080&path-style=1")
/// try backend.publish(staged)
/// try backend.read(blob: staged.sha256Hex, range: 0..<10) { chunk in send(chunk) }
/// ```
public protocol BlobBackend: Sendable {
  /// Where the bytes are, for logs and reports: a directory, or an `s3://` URL without credentials.
  var location: String { get }

  /// Whether ``publish(_:)`` is a cheap local link that belongs *inside* the catalog's write
  /// transaction (the filesystem: the dedupe decision and the link are one step), rather than
  /// an upload that must finish *before* it so the write lock is never held across a network
  /// transfer (S3: skip it when a read finds the row; publish again if the transaction then
  /// finds the row gone).
  var publishesInsideTransaction: Bool { get }

  /// Makes `staged` durable at its content address.
  /// - Throws: an I/O error, or the remote store's error (transient ones are worth a retry).
  func publish(_ staged: StagedBlob) throws

  /// The stored size of the blob, nil when nothing is stored at its address.
  func storedSize(ofBlob hex: String) throws -> Int64?

  /// Streams `range` of the blob (all of it when nil; clamped to its size) to `body`, a
  /// bounded chunk at a time.
  /// - Throws: an I/O error when the blob is missing, the remote store's error, or what `body` threw.
  func read(blob hex: String, range: Range<Int64>?, _ body: (UnsafeRawBufferPointer) throws -> Void) throws

  /// Removes the blob's bytes; nothing stored is fine.
  func remove(blob hex: String) throws

  /// Calls `body` with every blob stored at a well-formed address, its size and when it was
  /// stored (gc's grace period for strays: an upload whose commit is still coming).
  func forEachStoredBlob(dated body: (_ hex: String, _ size: Int64, _ stored: Date) throws -> Void) throws
}

extension BlobBackend {
  /// Calls `body` with every blob stored at a well-formed address, and its size.
  public func forEachStoredBlob(_ body: (_ hex: String, _ size: Int64) throws -> Void) throws {
    try forEachStoredBlob(dated: { hex, size, _ in try body(hex, size) })
  }
}

/// The key of a blob in a bucket (and its path under `blobs/`): `sha256/ab/cd/<hex>`.
public enum BlobAddress {
  public static func key(forHex hex: String) -> String {
    "sha256/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))/\(hex)"
  }

  /// The hex of a well-formed key, nil for anything else (a stray the commit path never makes).
  public static func hex(ofKey key: String) -> String? {
    let parts = key.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count == 4, parts[0] == "sha256" else { return nil }
    let hex = String(parts[3])
    guard BlobTreeWalker.isHex(hex, count: 64), parts[1] == hex.prefix(2),
      parts[2] == hex.dropFirst(2).prefix(2)
    else { return nil }
    return hex
  }
}
