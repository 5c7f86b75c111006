import Foundation
import LarderCrypto

/// Puts the data directory back in order at open, after any crash.
///
/// - `tmp/`: a temp file whose writer is gone (its `flock` is free) is removed. A file another
///   live process is still writing stays: its writer holds the lock.
/// - `trash/`: under the catalog's write lock, an entry whose `blobs` row still exists goes back
///   to its address (a collection crashed before committing); any other is removed. This is
///   skipped while a live collector holds `gc.lock`: its trash entries are its own business.
public struct RecoveryReport: Sendable, Equatable {
  public var tempFilesRemoved = 0
  public var trashRestored = 0
  public var trashRemoved = 0
}

enum Recovery {
  static func run(blobs: BlobStore, catalog: Catalog) throws -> RecoveryReport {
    var report = RecoveryReport()
    for name in POSIX.listDirectory(blobs.tmpDirectory.path) {
      if abandoned("\(blobs.tmpDirectory.path)/\(name)", remove: true) { report.tempFilesRemoved += 1 }
    }
    // Trash entries belong to a running collector while it holds gc.lock; only a free lock
    // means they are leftovers of a crash.
    let lock: CollectorLock?
    do {
      lock = try CollectorLock.acquire(in: blobs.root, create: false)
    } catch MaintenanceError.collectorBusy {
      return report
    }
    // A missing lock file means no collector ever ran here. Either way the entries are
    // rechecked under the catalog's write lock.
    defer { lock?.release() }
    let (restored, removed) = try recoverTrash(blobs: blobs, catalog: catalog)
    report.trashRestored = restored
    report.trashRemoved = removed
    return report
  }

  /// Puts trash entries back (their `blobs` row exists) or removes them, under the write lock.
  ///
  /// Call only while holding gc.lock. An entry that vanished meanwhile is skipped.
  static func recoverTrash(blobs: BlobStore, catalog: Catalog) throws -> (restored: Int, removed: Int) {
    let trash = POSIX.listDirectory(blobs.trashDirectory.path)
    guard !trash.isEmpty else { return (0, 0) }
    return try catalog.write { db in
      var restored = 0
      var removed = 0
      for name in trash {
        let path = "\(blobs.trashDirectory.path)/\(name)"
        let isFile = POSIX.lstat(path).map { ($0.st_mode & S_IFMT) == S_IFREG } ?? false
        // Only a regular file named exactly by a digest goes back, and never over a blob already
        // in place (one uploaded again since): a planted symlink, a duplicate or any other name
        // is simply removed.
        if isFile, BlobTreeWalker.isHex(name, count: 64), let digest = Hex.decode(name),
          POSIX.lstat(blobs.path(forHex: name)) == nil,
          try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [digest]) != nil
        {
          let target = blobs.path(forHex: name)
          let leaf = (target as NSString).deletingLastPathComponent
          try POSIX.makeDirectory(leaf)
          if !POSIX.rename(path, target) {
            if errno == ENOENT { continue }
            throw LarderError.posix("rename", path)
          }
          try POSIX.fsyncDirectory(leaf)
          restored += 1
        } else if POSIX.unlink(path) || errno != ENOENT {
          removed += 1
        }
      }
      if restored + removed > 0 { try POSIX.fsyncDirectory(blobs.trashDirectory.path) }
      return (restored, removed)
    }
  }

  /// True if `path` is a temp file no writer holds (its `flock` is free); with `remove`, it is
  /// also unlinked, and true means it is gone.
  ///
  /// A failed open proves nothing, except `ELOOP`: `O_NOFOLLOW` refused a symlink, which no
  /// writer creates (so it is abandoned, and only the link itself is removed). `ENOENT` is a
  /// writer that just committed and unlinked its file; `EMFILE` or `EACCES` say nothing about the
  /// writer: such a file must stay.
  static func abandoned(_ path: String, remove: Bool) -> Bool {
    let fd: Int32
    do {
      fd = try POSIX.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
    } catch LarderError.io(_, _, ELOOP) {
      return !remove || POSIX.unlink(path)
    } catch {
      return false
    }
    defer { POSIX.close(fd) }
    guard POSIX.tryLock(fd) else { return false }
    return !remove || POSIX.unlink(path)
  }
}
