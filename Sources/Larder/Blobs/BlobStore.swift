import Foundation
import LarderCrypto

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

  /// Opens the store at `root`, creating its directories.
  public init(root: URL) throws {
    self.root = root
    blobsPath = root.appendingPathComponent("blobs/sha256", isDirectory: true).path
    for dir in [root, blobsDirectory, tmpDirectory, trashDirectory, uploadsDirectory, quarantineDirectory] {
      try POSIX.makeDirectory(dir.path)
    }
  }

  /// The path of the blob with this digest.
  public func path(for sha256: [UInt8]) -> String {
    let hex = Hex.encode(sha256)
    return path(forHex: hex)
  }

  public func path(forHex hex: String) -> String {
    let a = hex.prefix(2)
    let b = hex.dropFirst(2).prefix(2)
    return "\(blobsPath)/\(a)/\(b)/\(hex)"
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
    guard case .file(let source) = staged.bytes else {
      throw LarderError.invalidArgument("content assembled in the shared store has no local file to link")
    }
    let hex = Hex.encode(staged.sha256)
    let leaf = "\(blobsPath)/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))"
    let parent = "\(blobsPath)/\(hex.prefix(2))"
    let createdParent = try POSIX.makeDirectory(parent)
    let createdLeaf = try POSIX.makeDirectory(leaf)
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
    return target
  }

  /// Opens a blob for reading.
  /// - Throws: ``LarderError/io(operation:path:errno:)`` when the file is missing.
  public func open(sha256: [UInt8]) throws -> BlobReader {
    try BlobReader(path: path(for: sha256))
  }
}
