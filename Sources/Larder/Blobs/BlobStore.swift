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

  /// Links a staged file into its content address and makes the name durable.
  ///
  /// Call only inside the catalog's write transaction, after finding no `blobs` row: a file
  /// already at the address is then a leftover of a crashed write (no row points at it) and is
  /// replaced by the verified staged copy.
  /// - Returns: the path now holding the blob.
  func place(_ staged: StagedBlob) throws -> String {
    let hex = Hex.encode(staged.sha256)
    let leaf = "\(blobsPath)/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))"
    let parent = "\(blobsPath)/\(hex.prefix(2))"
    let createdParent = try POSIX.makeDirectory(parent)
    let createdLeaf = try POSIX.makeDirectory(leaf)
    let target = "\(leaf)/\(hex)"
    if link(staged.path, target) != 0 {
      guard errno == EEXIST else { throw LarderError.posix("link", target) }
      // A stray from a crash between link and commit: no row refers to it.
      unlink(target)
      guard link(staged.path, target) == 0 else { throw LarderError.posix("link", target) }
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

/// Small wrappers over the system calls the store uses.
enum POSIX {
  /// Creates a directory if missing; true when it was created.
  @discardableResult
  static func makeDirectory(_ path: String, mode: mode_t = 0o755) throws -> Bool {
    if mkdir(path, mode) == 0 { return true }
    if errno == EEXIST {
      var st = stat()
      if stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { return false }
      throw LarderError.io(operation: "mkdir", path: path, errno: ENOTDIR)
    }
    if errno == ENOENT {
      // Create missing parents, then retry.
      let parent = (path as NSString).deletingLastPathComponent
      if !parent.isEmpty && parent != path {
        try makeDirectory(parent, mode: mode)
        return try makeDirectory(path, mode: mode)
      }
    }
    throw LarderError.posix("mkdir", path)
  }

  static func fsyncDirectory(_ path: String) throws {
    let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { throw LarderError.posix("open", path) }
    defer { close(fd) }
    guard fsync(fd) == 0 else { throw LarderError.posix("fsync", path) }
  }

  /// Writes all of `buffer`, retrying short writes and interrupts.
  static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: String) throws {
    var offset = 0
    while offset < buffer.count {
      let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
      if n < 0 {
        if errno == EINTR { continue }
        throw LarderError.posix("write", path)
      }
      offset += n
    }
  }

  /// Writes all of `buffer` at `offset` (`pwrite`), retrying short writes and interrupts.
  static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int64, path: String) throws {
    var done = 0
    while done < buffer.count {
      let n = pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
      if n < 0 {
        if errno == EINTR { continue }
        throw LarderError.posix("write", path)
      }
      done += n
    }
  }

  /// Reads up to `count` bytes at `offset`; fewer only at end of file.
  static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, path: String) throws -> Int {
    var done = 0
    while done < buffer.count {
      let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
      if n < 0 {
        if errno == EINTR { continue }
        throw LarderError.posix("read", path)
      }
      if n == 0 { break }
      done += n
    }
    return done
  }

  static func fileSize(_ fd: Int32, path: String) throws -> Int64 {
    var st = stat()
    guard fstat(fd, &st) == 0 else { throw LarderError.posix("fstat", path) }
    return Int64(st.st_size)
  }

  static func modificationTime(_ path: String) -> Date? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    return Date(timeIntervalSince1970: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9)
  }

  /// Names in a directory, without `.` and `..`.
  static func listDirectory(_ path: String) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
  }
}
