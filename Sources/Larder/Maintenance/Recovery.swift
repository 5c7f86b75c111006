import Foundation
import LarderCrypto

/// Puts the data directory back in order at open, after any crash.
///
/// - `tmp/`: a temp file whose writer is gone (its `flock` is free) is removed. A file another
///   live process is still writing stays: its writer holds the lock.
/// - `trash/`: under the catalog's write lock, an entry whose `blobs` row still exists goes back
///   to its address (a collection crashed before committing); any other is removed.
public struct RecoveryReport: Sendable, Equatable {
  public var tempFilesRemoved = 0
  public var trashRestored = 0
  public var trashRemoved = 0
}

enum Recovery {
  static func run(blobs: BlobStore, catalog: Catalog) throws -> RecoveryReport {
    var report = RecoveryReport()
    for name in POSIX.listDirectory(blobs.tmpDirectory.path) {
      if removeIfAbandoned("\(blobs.tmpDirectory.path)/\(name)") { report.tempFilesRemoved += 1 }
    }
    let trash = POSIX.listDirectory(blobs.trashDirectory.path)
    if !trash.isEmpty {
      try catalog.write { db in
        for name in trash {
          let path = "\(blobs.trashDirectory.path)/\(name)"
          let hex = String(name.prefix(64))
          if let digest = Hex.decode(hex), digest.count == 32,
            try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [digest]) != nil
          {
            let target = blobs.path(forHex: hex)
            try POSIX.makeDirectory((target as NSString).deletingLastPathComponent)
            if rename(path, target) != 0 { throw LarderError.posix("rename", path) }
            try POSIX.fsyncDirectory((target as NSString).deletingLastPathComponent)
            report.trashRestored += 1
          } else {
            unlink(path)
            report.trashRemoved += 1
          }
        }
        if report.trashRestored + report.trashRemoved > 0 { try POSIX.fsyncDirectory(blobs.trashDirectory.path) }
      }
    }
    return report
  }

  /// Removes `path` if no process holds its lock; true if removed.
  static func removeIfAbandoned(_ path: String) -> Bool {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
    guard fd >= 0 else {
      // Not a regular file we can open (a symlink planted here?): remove the name itself.
      return unlink(path) == 0
    }
    defer { close(fd) }
    guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return false }
    return unlink(path) == 0
  }
}
