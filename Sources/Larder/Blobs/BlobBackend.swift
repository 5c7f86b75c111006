import Foundation
import LarderCrypto

/// Where committed content lives: the seam between the store and its bytes.
///
/// Two implementations: ``FilesystemBlobBackend`` (the data directory's `blobs/`, the
/// embedded default) and ``S3BlobBackend`` (a bucket of an S3-compatible store, for several
/// nodes sharing one store). Both address content by a ``BlobAddress``: the SHA-256 and the
/// row's *fence* (ARCHITECTURE.md, "Fenced deletion"), and neither decides whether a blob *exists*:
/// the catalog's `blobs` row does, inside the write transaction (ARCHITECTURE.md, "Invariants and
/// the write path"). The backend only holds bytes.
///
/// The contract, which the write path, gc and verify rely on:
/// - ``publish(_:at:)`` makes verified staged content durable at its address before the commit
///   that inserts its row (I1: a row exists ⇒ its bytes exist). Publishing the same content
///   again is harmless: the address is the content.
/// - ``read(_:range:_:)`` streams with bounded memory, never the whole blob at once.
/// - ``remove(_:)`` of an absent blob succeeds, so an interrupted collector can run again.
/// - ``forEachStoredBlob(_:)`` visits every stored address page by page (gc's stray check,
///   verify's "every row has its bytes"), in bounded memory however many blobs there are.
///
/// ```swift
/// let backend: any BlobBackend = try S3BlobBackend(url: "s3://larder?endpoint=http://127.0.0.1:18080&path-style=1")
/// let address = BlobAddress(hex: staged.sha256Hex, fence: 7)
/// try backend.publish(staged, at: address)
/// try backend.read(address, range: 0..<10) { chunk in send(chunk) }
/// ```
public protocol BlobBackend: Sendable {
  /// Where the bytes are, for logs and reports: a directory, or an `s3://` URL without credentials.
  var location: String { get }

  /// Whether ``publish(_:at:)`` is a cheap local link that belongs *inside* the catalog's write
  /// transaction (the filesystem: the dedupe decision and the link are one step; every address
  /// has fence 0), rather than an upload that must finish *before* it so no lock is ever held
  /// across a network transfer (S3: each upload goes to a fresh fence, ARCHITECTURE.md, "Fenced
  /// deletion"). Descriptive: no subsystem asks it; the store's content store is chosen with the backend
  /// (``LocalContentStore`` links inside, ``FencedContentStore`` publishes before).
  var publishesInsideTransaction: Bool { get }

  /// Makes `staged` durable at `address` (whose hex is the staged content's).
  /// - Throws: an I/O error, or the remote store's error (transient ones are worth a retry).
  func publish(_ staged: StagedBlob, at address: BlobAddress) throws

  /// The stored size of the blob, nil when nothing is stored at its address.
  func storedSize(of address: BlobAddress) throws -> Int64?

  /// Streams `range` of the blob (all of it when nil; clamped to its size) to `body`, a
  /// bounded chunk at a time.
  /// - Throws: an I/O error (`ENOENT`) when the blob is missing, the remote store's error, or
  ///   what `body` threw.
  func read(_ address: BlobAddress, range: Range<Int64>?, _ body: (UnsafeRawBufferPointer) throws -> Void) throws

  /// Removes the blob's bytes; nothing stored is fine.
  func remove(_ address: BlobAddress) throws

  /// Calls `body` with every blob stored at a well-formed address, its size and when it was
  /// stored (gc's grace period for strays: an upload whose commit is still coming).
  func forEachStoredBlob(dated body: (_ address: BlobAddress, _ size: Int64, _ stored: Date) throws -> Void) throws
}

extension BlobBackend {
  /// Calls `body` with every blob stored at a well-formed address, and its size.
  public func forEachStoredBlob(_ body: (_ address: BlobAddress, _ size: Int64) throws -> Void) throws {
    try forEachStoredBlob(dated: { address, size, _ in try body(address, size) })
  }
}

/// Where one blob's bytes are: its SHA-256 and its row's *fence*.
///
/// A fence is a number the catalog hands out once and never again (ARCHITECTURE.md, "Fenced
/// deletion"): a writer that uploads to S3 takes a fresh one, so an address a collector condemned
/// is never claimed by a row again, and a DELETE that arrives late cannot remove bytes anyone
/// relies on. Fence 0 is every blob of the filesystem backend and every S3 blob stored before
/// fences existed; its key is the one those always had, `sha256/ab/cd/<hex>`. Any other fence adds
/// `.<fence>` in decimal: `sha256/ab/cd/<hex>.7`.
public struct BlobAddress: Hashable, Sendable, CustomStringConvertible {
  /// Lower-case hex SHA-256 of the content.
  public let hex: String
  public let fence: Int64

  public init(hex: String, fence: Int64 = 0) {
    self.hex = hex
    self.fence = fence
  }

  /// The key in a bucket (below its prefix); at fence 0 also the path under `blobs/`.
  public var key: String {
    let base = Self.key(forHex: hex)
    return fence == 0 ? base : "\(base).\(fence)"
  }

  public var description: String { key }

  /// The digest's bytes, for the catalog (nil for a malformed hex, which no row has).
  var sha256: [UInt8] { Hex.decode(hex) ?? [] }

  /// The fence-0 key of `hex`: `sha256/ab/cd/<hex>`.
  public static func key(forHex hex: String) -> String {
    "sha256/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))/\(hex)"
  }

  /// The address of a well-formed key, nil for anything else (a stray the commit path never
  /// makes). A fence is written in canonical decimal (no sign, no leading zero), so one address
  /// has one key.
  public init?(key: String) {
    let parts = key.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count == 4, parts[0] == "sha256" else { return nil }
    let leaf = parts[3]
    let hex = String(leaf.prefix(64))
    let rest = leaf.dropFirst(64)
    guard BlobTreeWalker.isHex(hex, count: 64), parts[1] == hex.prefix(2), parts[2] == hex.dropFirst(2).prefix(2)
    else { return nil }
    var fence: Int64 = 0
    if !rest.isEmpty {
      let digits = rest.dropFirst()
      guard rest.first == ".", let first = digits.first, first != "0", digits.allSatisfy({ $0.isASCII && $0.isNumber }),
        let value = Int64(digits)
      else { return nil }
      fence = value
    }
    self.init(hex: hex, fence: fence)
  }
}
