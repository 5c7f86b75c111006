import Foundation
import LarderCrypto

/// A backup destination directory:
/// ```
/// DEST/store-id                      the store whose backups these are
/// DEST/blobs/sha256/ab/cd/<hex>      content, shared by every snapshot (as in a data directory)
/// DEST/snapshots/<id>/catalog.sqlite the catalog as of the snapshot
/// DEST/snapshots/<id>/manifest.json  written last: only then is the snapshot listed
/// DEST/tmp/                          files being written (renamed into place when whole)
/// DEST/backup.lock                   held by a backup or prune (one at a time)
/// ```
/// Every file is written to `tmp/`, fsynced and renamed, so a file at its final name is whole.
package struct BackupDestination: Sendable {
  package let root: String

  package init(_ path: String) throws {
    guard !path.hasPrefix("s3://") else {
      throw BackupError.notSupportedYet("a backup destination in S3 (\(path))")
    }
    root = URL(fileURLWithPath: path).standardizedFileURL.path
  }

  var blobsRoot: String { "\(root)/blobs/sha256" }
  var snapshotsRoot: String { "\(root)/snapshots" }
  var tmp: String { "\(root)/tmp" }
  var storeIDPath: String { "\(root)/store-id" }

  func blobPath(_ hex: String) -> String { "\(blobsRoot)/\(BlobStore.fanOut(hex))" }
  func snapshotDirectory(_ id: String) -> String { "\(snapshotsRoot)/\(id)" }
  func manifestPath(_ id: String) -> String { "\(snapshotDirectory(id))/manifest.json" }

  /// Makes the layout (a backup's first step).
  /// - Throws: ``BackupError/unwritable(path:reason:)``.
  func prepare() throws {
    do {
      for dir in [root, blobsRoot, snapshotsRoot, tmp] { try POSIX.makeDirectory(dir) }
      guard access(root, W_OK) == 0 else { throw LarderError.posix("access", root) }
    } catch {
      throw BackupError.unwritable(path: root, reason: "\(error)")
    }
  }

  /// Takes `backup.lock` without waiting. - Throws: ``BackupError/busy(lockPath:)``.
  func lock() throws -> DestinationLock {
    let path = "\(root)/backup.lock"
    let fd = try POSIX.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode: 0o644)
    guard POSIX.tryLock(fd) else {
      POSIX.close(fd)
      throw BackupError.busy(lockPath: path)
    }
    return DestinationLock(fd: fd)
  }

  /// The store the destination's backups are of; nil for a new destination.
  func recordedStoreID() -> String? {
    FileManager.default.contents(atPath: storeIDPath).map {
      String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
  }

  /// Checks (or, for a new destination, records) that it holds `storeID`'s backups.
  func claim(for storeID: String, force: Bool) throws {
    if let holds = recordedStoreID() {
      guard holds == storeID || force else {
        throw BackupError.otherStore(destination: root, holds: holds, store: storeID)
      }
      return
    }
    try writeAtomically(Data((storeID + "\n").utf8), to: storeIDPath)
  }

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

  /// Complete snapshots (those with a manifest), oldest first.
  package func snapshots() throws -> [BackupManifest] {
    try POSIX.listDirectory(snapshotsRoot).sorted().compactMap { id in
      guard let data = FileManager.default.contents(atPath: manifestPath(id)) else { return nil }
      do {
        return try BackupManifest.decode(data)
      } catch {
        throw BackupError.damaged(snapshot: id, what: "its manifest is unreadable (\(error))")
      }
    }
  }

  /// The snapshot `id`, or the newest one when nil.
  package func snapshot(_ id: String?) throws -> BackupManifest {
    guard POSIX.exists(root) else { throw BackupError.unknownSnapshot(id: id, destination: root) }
    let all = try snapshots()
    guard let found = id.map({ id in all.first { $0.id == id } }) ?? all.last else {
      throw BackupError.unknownSnapshot(id: id, destination: root)
    }
    return found
  }

  /// Snapshot directories without a manifest: left by a killed backup (only ever removed under
  /// the lock, so never one being written).
  func incompleteSnapshots() -> [String] {
    POSIX.listDirectory(snapshotsRoot).filter { !POSIX.exists(manifestPath($0)) }
  }

  /// Removes a snapshot directory: the manifest first, so it is never half listed.
  func removeSnapshot(_ id: String) {
    let directory = snapshotDirectory(id)
    _ = POSIX.unlink(manifestPath(id))
    for name in POSIX.listDirectory(directory) { _ = POSIX.unlink("\(directory)/\(name)") }
    _ = rmdir(directory)
  }

  /// Removes what a killed run left: incomplete snapshots and temp files. Under the lock.
  func removeLeftovers() {
    for id in incompleteSnapshots() { removeSnapshot(id) }
    for name in POSIX.listDirectory(tmp) { _ = POSIX.unlink("\(tmp)/\(name)") }
  }

  /// Opens a snapshot's catalog file and checks it against the manifest's checksum.
  func openCatalog(_ manifest: BackupManifest) throws -> SQLiteDatabase {
    let path = "\(snapshotDirectory(manifest.id))/\(manifest.catalogFile)"
    let (hex, _) = try Self.sha256(ofFile: path)
    guard hex == manifest.catalogSHA256 else {
      throw BackupError.damaged(
        snapshot: manifest.id,
        what: "the catalog's SHA-256 is \(hex), the manifest says \(manifest.catalogSHA256)")
    }
    return try SQLiteDatabase(path: path, readOnly: true)
  }

  /// The SHA-256 (hex) and size of a file.
  static func sha256(ofFile path: String) throws -> (String, Int64) {
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

/// The flock on `backup.lock`; released with the value or the process.
final class DestinationLock: @unchecked Sendable {
  private let fd: Int32
  init(fd: Int32) { self.fd = fd }
  deinit {
    POSIX.unlock(fd)
    POSIX.close(fd)
  }
}
