import Foundation
import LarderCrypto
import Synchronization

/// Content-addressed bytes on the filesystem.
///
/// Layout under the data directory:
/// ```
/// blobs/sha256/ab/cd/abcd…64hex   read-only (0444); the name is the SHA-256 of the content
/// tmp/                            uploads in flight, exclusive random names, flock'ed by their writer
/// trash/                          blobs being collected
/// uploads/                        partial resumable uploads
/// quarantine/                     blobs that failed verification
/// reserve                         a few MiB held back for deletes on a full disk (SpaceReserve)
/// ```
/// The store only places and opens files; whether a blob *exists* is decided by the catalog's
/// `blobs` row, inside the write transaction (see ``FileStore``).
public struct BlobStore: Sendable {
  public let root: URL
  /// `blobs/sha256` as a path, made once: every download builds a blob path from it.
  let blobsPath: String
  public var blobsDirectory: URL { root.appendingPathComponent("blobs/sha256", isDirectory: true) }
  public var tmpDirectory: URL { root.appendingPathComponent("tmp", isDirectory: true) }
  public var trashDirectory: URL { root.appendingPathComponent("trash", isDirectory: true) }
  public var uploadsDirectory: URL { root.appendingPathComponent("uploads", isDirectory: true) }
  public var quarantineDirectory: URL { root.appendingPathComponent("quarantine", isDirectory: true) }

  /// Fan-out directories known to be durable, when several writers may link at once.
  let durableDirectories: DurableFanOut?

  /// Opens the store at `root`, creating its directories. With `concurrentWriters` (a shared
  /// catalog, whose keyed writes of different contents link into `blobs/` at the same time), a
  /// writer never trusts a fan-out directory it did not make durable itself (see ``place(_:)``).
  /// - Parameter create: make the directories that are missing (not when opened read-only).
  public init(root: URL, concurrentWriters: Bool = false, create: Bool = true) throws {
    self.root = root
    durableDirectories = concurrentWriters ? DurableFanOut() : nil
    blobsPath = root.appendingPathComponent("blobs/sha256", isDirectory: true).path
    for dir in [root, blobsDirectory, tmpDirectory, trashDirectory, uploadsDirectory, quarantineDirectory] where create {
      try POSIX.makeDirectory(dir.path)
    }
  }

  /// The path of the blob with this digest.
  public func path(for sha256: [UInt8]) -> String {
    let hex = Hex.encode(sha256)
    return path(forHex: hex)
  }

  public func path(forHex hex: String) -> String { "\(blobsPath)/\(Self.fanOut(hex))" }

  /// `ab/cd/<hex>`: where a blob lives under `blobs/sha256/` (a backup uses the same layout).
  package static func fanOut(_ hex: String) -> String {
    "\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))/\(hex)"
  }

  /// Starts a streaming write into `tmp/`.
  public func makeWriter(options: BlobWriter.Options = .init()) throws -> BlobWriter {
    try BlobWriter(directory: tmpDirectory.path, options: options)
  }

  /// Starts a streaming write whose blocks `reserve` admits (the store's writes: ``FileStore``).
  func makeWriter(options: BlobWriter.Options, reserve: SpaceReserve?) throws -> BlobWriter {
    try BlobWriter(directory: tmpDirectory.path, options: options, reserve: reserve)
  }

  /// Links a staged file into its content address and makes the name durable.
  ///
  /// Call only inside the catalog's write transaction, after finding no `blobs` row: a file
  /// already at the address is then a leftover of a crashed write (no row points at it) and is
  /// replaced by the verified staged copy.
  /// - Returns: the path now holding the blob.
  func place(_ staged: StagedBlob) throws -> String {
    guard let source = staged.localPath else {
      throw LarderError.invalidArgument("content assembled in the shared store has no local file to link")
    }
    let hex = Hex.encode(staged.sha256)
    let leaf = "\(blobsPath)/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))"
    let parent = "\(blobsPath)/\(hex.prefix(2))"
    var createdParent = try POSIX.makeDirectory(parent)
    var createdLeaf = try POSIX.makeDirectory(leaf)
    if let durable = durableDirectories {
      // Another writer may have made the directory a moment ago and not fsync'ed its entry yet:
      // until this process has seen it durable, sync its entry as if we had made it.
      let (parentIndex, leafIndex) = DurableFanOut.indexes(hex)
      createdParent = createdParent || !durable.contains(parentIndex)
      createdLeaf = createdLeaf || !durable.contains(leafIndex)
    }
    let target = "\(leaf)/\(hex)"
    if !POSIX.link(source, target) {
      guard errno == EEXIST else { throw LarderError.posix("link", target) }
      // A stray from a crash between link and commit: no row refers to it.
      POSIX.unlink(target)
      guard POSIX.link(source, target) else { throw LarderError.posix("link", target) }
    }
    try POSIX.fsyncDirectory(leaf)
    if createdLeaf { try POSIX.fsyncDirectory(parent) }
    if createdParent { try POSIX.fsyncDirectory(blobsPath) }
    if let durable = durableDirectories {
      let (parentIndex, leafIndex) = DurableFanOut.indexes(hex)
      durable.insert(parentIndex)
      durable.insert(leafIndex)
    }
    return target
  }

  /// Opens a blob for reading.
  /// - Throws: ``LarderError/io(operation:path:errno:)`` when the file is missing.
  public func open(sha256: [UInt8]) throws -> BlobReader {
    try BlobReader(path: path(for: sha256))
  }
}

/// Which fan-out directories of `blobs/sha256` (256 `ab/`, 65 536 `ab/cd/`) this process has
/// seen durable: made and fsync'ed their entries itself, or fsync'ed them on first use. One bit
/// each (8 KiB).
///
/// With one writer at a time (SQLite) the writer that makes a directory syncs it before it
/// commits, and nobody links into it before that. With concurrent writers (keyed writes on a
/// shared catalog) another writer may link into a directory whose own entry is not durable yet
/// and commit first: a crash could then lose the directory, and a committed blob with it (I1).
final class DurableFanOut: Sendable {
  private let bits = Mutex([UInt64](repeating: 0, count: (256 + 65_536) / 64))

  /// The bit of `ab/` and of `ab/cd/` for a blob's hex digest.
  static func indexes(_ hex: String) -> (parent: Int, leaf: Int) {
    let utf8 = Array(hex.utf8.prefix(4))
    func nibble(_ c: UInt8) -> Int { Int(c <= 0x39 ? c &- 0x30 : (c | 0x20) &- 0x61 &+ 10) & 0xF }
    let a = nibble(utf8[0]) << 4 | nibble(utf8[1])
    let b = nibble(utf8[2]) << 4 | nibble(utf8[3])
    return (a, 256 + (a << 8 | b))
  }

  func contains(_ index: Int) -> Bool { bits.withLock { $0[index >> 6] & (1 << UInt64(index & 63)) != 0 } }

  func insert(_ index: Int) { bits.withLock { $0[index >> 6] |= 1 << UInt64(index & 63) } }
}
