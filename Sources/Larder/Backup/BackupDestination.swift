import Foundation
import LarderCrypto

/// Where backups go (issue 35): a directory (``DirectoryDestination``) or a bucket prefix of an
/// S3-compatible store (`S3BackupDestination`, in LarderS3Store). Both hold one layout,
/// relative to their root:
/// ```
/// store-id                      the store whose backups these are
/// blobs/sha256/ab/cd/<hex>      content, shared by every snapshot (as in a data directory)
/// snapshots/<id>/catalog.sqlite the catalog as of the snapshot
/// snapshots/<id>/manifest.json  written last: only then is the snapshot listed
/// backup.lock                   held by a backup or prune (one at a time)
/// ```
/// Every file appears whole at its name (a directory: written to `tmp/`, fsynced, renamed; S3:
/// one PUT, checked against its SHA-256 by the store). ``Backup``, ``BackupVerifier``,
/// ``BackupPruner`` and ``Restore`` see only this protocol and its extension below.
package protocol BackupDestination: Sendable {
  /// The destination in words: its path, or its `s3://` URL (never credentials).
  var location: String { get }

  /// Checks that the destination can be reached and written, and makes its layout; changes
  /// nothing when it cannot (a backup's first step).
  /// - Throws: ``BackupError/unwritable(path:reason:)``, ``BackupError/unreachable(destination:reason:)``.
  func prepare() throws
  /// Whether anything was ever backed up here (a destination never prepared has no snapshot).
  func exists() throws -> Bool
  /// Takes the destination's lock without waiting; it is released with the returned value.
  /// - Throws: ``BackupError/busy(lockPath:)``.
  func lock() throws -> any BackupDestinationLock
  /// The store the destination's backups are of (`store-id`); nil for a new destination.
  func recordedStoreID() throws -> String?
  func recordStoreID(_ storeID: String) throws

  /// Every snapshot with anything stored, complete or not.
  func snapshotIDs() throws -> [String]
  /// The snapshot's manifest; nil when it has none (it was never finished).
  func manifestData(_ id: String) throws -> Data?
  /// Writes the manifest whole and durably: the step that lists the snapshot.
  func writeManifest(_ data: Data, snapshot id: String) throws
  /// Removes a snapshot, its manifest first, so it is never half listed.
  func removeSnapshot(_ id: String) throws
  /// Removes the temporary files a killed run left (under the lock).
  func removeTemporaries() throws

  /// A new local path where the catalog file of snapshot `id` is written before it is stored.
  func catalogStagingPath(_ id: String) throws -> String
  /// Stores the durable local file `staged` as snapshot `id`'s catalog `name` (and consumes it).
  func storeCatalog(from staged: String, snapshot id: String, name: String) throws
  /// A local copy of snapshot `id`'s catalog `name` to read (removed with the value when it is a copy).
  func fetchCatalog(snapshot id: String, name: String) throws -> BackupLocalFile

  /// Every blob stored (hex → size) when one listing tells it cheaply (S3: a LIST per 1,000);
  /// nil when looking blob by blob is the only way (a directory).
  func listBlobs() throws -> [String: Int64]?
  /// What is stored for the blob `hex`: nil when nothing.
  func storedBlob(_ hex: String) throws -> BackupStoredBlob?
  /// Stores the blob `hex` of `size` bytes, streamed by `read` and re-hashed on the way (bytes
  /// that do not hash to their name are refused, not stored). Durable after ``flush()``.
  func putBlob(hex: String, size: Int64, _ read: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void) throws
  /// Streams the stored blob `hex`.
  func readBlob(_ hex: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws
  /// Every stored blob (hex, size).
  func forEachBlob(_ body: (String, Int64) throws -> Void) throws
  func removeBlob(_ hex: String) throws
  /// Makes every blob put so far durable, before a manifest names them.
  func flush() throws
  /// Where the blob `hex` is, for messages.
  func place(ofBlob hex: String) -> String
}

/// A destination's lock (``BackupDestination/lock()``), released when the value goes.
package protocol BackupDestinationLock: AnyObject {
  /// Keeps a lock that is a lease (S3's) alive while a long backup copies.
  func renew() throws
}

/// A blob as the destination stores it.
package struct BackupStoredBlob: Sendable, Equatable {
  package var size: Int64
  /// Whether it is a plain file (a directory destination's other entries are damage).
  package var isRegular: Bool
  package init(size: Int64, isRegular: Bool = true) {
    self.size = size
    self.isRegular = isRegular
  }
}

/// A local file to read a snapshot's catalog from: the file itself, or a downloaded copy that
/// is removed with this value.
package final class BackupLocalFile: @unchecked Sendable {
  package let path: String
  private let temporary: Bool
  package init(path: String, temporary: Bool) {
    self.path = path
    self.temporary = temporary
  }
  deinit { if temporary { _ = unlink(path) } }
}

extension BackupDestination {
  /// Checks (or, for a new destination, records) that it holds `storeID`'s backups.
  func claim(for storeID: String, force: Bool) throws {
    if let holds = try recordedStoreID() {
      guard holds == storeID || force else {
        throw BackupError.otherStore(destination: location, holds: holds, store: storeID)
      }
      return
    }
    try recordStoreID(storeID)
  }

  /// Complete snapshots (those with a manifest), oldest first.
  package func snapshots() throws -> [BackupManifest] {
    try snapshotIDs().sorted().compactMap { id in
      guard let data = try manifestData(id) else { return nil }
      do {
        return try BackupManifest.decode(data)
      } catch {
        throw BackupError.damaged(snapshot: id, what: "its manifest is unreadable (\(error))")
      }
    }
  }

  /// The snapshot `id`, or the newest one when nil.
  package func snapshot(_ id: String?) throws -> BackupManifest {
    guard try exists() else { throw BackupError.unknownSnapshot(id: id, destination: location) }
    let all = try snapshots()
    guard let found = id.map({ id in all.first { $0.id == id } }) ?? all.last else {
      throw BackupError.unknownSnapshot(id: id, destination: location)
    }
    return found
  }

  /// Removes what a killed run left: snapshots without a manifest (only ever removed under the
  /// lock, so never one being written) and temporary files.
  func removeLeftovers() throws {
    for id in try snapshotIDs() where try manifestData(id) == nil { try removeSnapshot(id) }
    try removeTemporaries()
  }

  /// Opens a snapshot's catalog (a local copy for a remote destination) and checks it against
  /// the manifest's checksum; the database keeps `file` alive as long as it is used.
  func openCatalog(_ manifest: BackupManifest) throws -> (SQLiteDatabase, BackupLocalFile) {
    let file = try fetchCatalog(snapshot: manifest.id, name: manifest.catalogFile)
    let (hex, _) = try BackupFiles.sha256(ofFile: file.path)
    guard hex == manifest.catalogSHA256 else {
      throw BackupError.damaged(
        snapshot: manifest.id,
        what: "the catalog's SHA-256 is \(hex), the manifest says \(manifest.catalogSHA256)")
    }
    return (try SQLiteDatabase(path: file.path, readOnly: true), file)
  }
}

/// A backup destination directory (``BackupDestination``'s layout, plus `tmp/` for files being
/// written). Every file is written to `tmp/`, fsynced and renamed, so a file at its final name
/// is whole; blobs are flushed once for a whole run (``flush()``).
package struct DirectoryDestination: BackupDestination {
  package let root: String

  package init(_ path: String) {
    root = URL(fileURLWithPath: path).standardizedFileURL.path
  }

  package var location: String { root }
  var blobsRoot: String { "\(root)/blobs/sha256" }
  var snapshotsRoot: String { "\(root)/snapshots" }
  var tmp: String { "\(root)/tmp" }
  var storeIDPath: String { "\(root)/store-id" }

  func blobPath(_ hex: String) -> String { "\(blobsRoot)/\(BlobStore.fanOut(hex))" }
  func snapshotDirectory(_ id: String) -> String { "\(snapshotsRoot)/\(id)" }
  func manifestPath(_ id: String) -> String { "\(snapshotDirectory(id))/manifest.json" }

  package func prepare() throws {
    do {
      for dir in [root, blobsRoot, snapshotsRoot, tmp] { try POSIX.makeDirectory(dir) }
      guard access(root, W_OK) == 0 else { throw LarderError.posix("access", root) }
    } catch {
      throw BackupError.unwritable(path: root, reason: "\(error)")
    }
  }

  package func exists() -> Bool { POSIX.exists(snapshotsRoot) }

  package func lock() throws -> any BackupDestinationLock {
    let path = "\(root)/backup.lock"
    let fd = try POSIX.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode: 0o644)
    guard POSIX.tryLock(fd) else {
      POSIX.close(fd)
      throw BackupError.busy(lockPath: path)
    }
    return DirectoryLock(fd: fd)
  }

  package func recordedStoreID() -> String? {
    FileManager.default.contents(atPath: storeIDPath).map {
      String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
  }

  package func recordStoreID(_ storeID: String) throws {
    try writeAtomically(Data((storeID + "\n").utf8), to: storeIDPath)
  }

  package func snapshotIDs() -> [String] { POSIX.listDirectory(snapshotsRoot) }

  package func manifestData(_ id: String) -> Data? { FileManager.default.contents(atPath: manifestPath(id)) }

  package func writeManifest(_ data: Data, snapshot id: String) throws {
    try writeAtomically(data, to: manifestPath(id))
    try POSIX.fsyncDirectory(snapshotsRoot)
  }

  package func removeSnapshot(_ id: String) throws {
    let directory = snapshotDirectory(id)
    _ = POSIX.unlink(manifestPath(id))
    for name in POSIX.listDirectory(directory) { _ = POSIX.unlink("\(directory)/\(name)") }
    _ = rmdir(directory)
    try POSIX.fsyncDirectory(snapshotsRoot)
  }

  package func removeTemporaries() {
    for name in POSIX.listDirectory(tmp) { _ = POSIX.unlink("\(tmp)/\(name)") }
  }

  package func catalogStagingPath(_ id: String) -> String { "\(tmp)/catalog-\(id).sqlite" }

  package func storeCatalog(from staged: String, snapshot id: String, name: String) throws {
    let directory = snapshotDirectory(id)
    try POSIX.makeDirectory(directory)
    guard POSIX.rename(staged, "\(directory)/\(name)") else { throw LarderError.posix("rename", directory) }
    try POSIX.fsyncDirectory(directory)
  }

  package func fetchCatalog(snapshot id: String, name: String) -> BackupLocalFile {
    BackupLocalFile(path: "\(snapshotDirectory(id))/\(name)", temporary: false)
  }

  package func listBlobs() -> [String: Int64]? { nil }

  package func storedBlob(_ hex: String) -> BackupStoredBlob? {
    POSIX.lstat(blobPath(hex)).map {
      BackupStoredBlob(size: Int64($0.st_size), isRegular: ($0.st_mode & S_IFMT) == S_IFREG)
    }
  }

  package func putBlob(
    hex: String, size: Int64, _ read: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void
  ) throws {
    let target = blobPath(hex)
    try POSIX.makeDirectory((target as NSString).deletingLastPathComponent)
    try BlobCopy.copy(hex: hex, size: size, to: target, through: tmp, durable: false, read)
  }

  package func readBlob(_ hex: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    try BlobReader(path: blobPath(hex)).forEachChunk(in: nil, body)
  }

  package func forEachBlob(_ body: (String, Int64) throws -> Void) throws {
    for a in POSIX.listDirectory(blobsRoot) {
      for b in POSIX.listDirectory("\(blobsRoot)/\(a)") {
        let directory = "\(blobsRoot)/\(a)/\(b)"
        for hex in POSIX.listDirectory(directory) {
          try body(hex, POSIX.lstat("\(directory)/\(hex)").map { Int64($0.st_size) } ?? 0)
        }
      }
    }
  }

  package func removeBlob(_ hex: String) throws {
    guard POSIX.unlink(blobPath(hex)) || errno == ENOENT else { throw LarderError.posix("unlink", blobPath(hex)) }
  }

  /// One flush of the destination's filesystem (data and metadata, the new directories and
  /// names included) for every blob of the run, instead of an fsync per blob and per directory.
  /// Also when this run copied nothing: blobs a killed run left may still be only in the page cache.
  package func flush() throws { try POSIX.syncFilesystem(of: root) }

  package func place(ofBlob hex: String) -> String { blobPath(hex) }

  /// Writes `data` to `tmp/`, fsyncs it and renames it to `path` (whose directory is fsynced).
  func writeAtomically(_ data: Data, to path: String) throws {
    let temp = "\(tmp)/\(SecureRandom.hexIdentifier(byteCount: 8)).part"
    let fd = try POSIX.open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode: 0o644)
    do {
      try data.withUnsafeBytes { try POSIX.writeAll(fd, $0, path: temp) }
      try POSIX.fsync(fd, path: temp)
      POSIX.close(fd)
    } catch {
      POSIX.close(fd)
      _ = POSIX.unlink(temp)
      throw error
    }
    guard POSIX.rename(temp, path) else { throw LarderError.posix("rename", path) }
    try POSIX.fsyncDirectory((path as NSString).deletingLastPathComponent)
  }
}

/// The flock on a directory destination's `backup.lock`; released with the value or the process.
final class DirectoryLock: BackupDestinationLock, @unchecked Sendable {
  private let fd: Int32
  init(fd: Int32) { self.fd = fd }
  func renew() {}
  deinit {
    POSIX.unlock(fd)
    POSIX.close(fd)
  }
}

package enum BackupFiles {
  /// The SHA-256 (hex) and size of a file.
  package static func sha256(ofFile path: String) throws -> (String, Int64) {
    let fd = try POSIX.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    defer { POSIX.close(fd) }
    let digest = Digest(.sha256)
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    var offset: Int64 = 0
    while true {
      let n = try buffer.withUnsafeMutableBytes { try POSIX.readFully(fd, into: $0, at: offset, path: path) }
      if n == 0 { break }
      buffer.withUnsafeBytes { digest.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
      offset += Int64(n)
    }
    return (Hex.encode(digest.finalize()), offset)
  }
}
