import Foundation
import LarderLogging
import LarderCrypto

/// Puts the store back in order at open, after any crash.
///
/// - `tmp/`: a temp file whose writer is gone (its `flock` is free) is removed. A file another
///   live process is still writing stays: its writer holds the lock.
/// - What an interrupted collection left, settled by the content store's one
///   ``ContentStore/recover(dryRun:)``: trash entries go back or go (filesystem), committed
///   deletion intents are carried out (S3). Skipped while a live collector holds the collector
///   lock: its leftovers are its own business.
public struct RecoveryReport: Sendable, Equatable {
  public var tempFilesRemoved = 0
  public var trashRestored = 0
  public var trashRemoved = 0
  /// Deletions an interrupted collection committed and recovery carried out.
  public var deletionsFinished = 0
}

enum Recovery {
  static func run(blobs: BlobStore, content: any ContentStore, catalog: Catalog, logger: Logger) throws
    -> RecoveryReport
  {
    var report = RecoveryReport()
    for name in POSIX.listDirectory(blobs.tmpDirectory.path) {
      if abandoned("\(blobs.tmpDirectory.path)/\(name)", remove: true) { report.tempFilesRemoved += 1 }
    }
    // Most opens find nothing left over: they then take no lock, so a collector starting in
    // another process meanwhile never finds its lock held by an open.
    do {
      guard try content.recover(dryRun: true) != ContentRecovery() else { return report }
    } catch LarderError.blobStoreUnavailable {
      return report
    }
    // Leftovers belong to a running collector while it holds the collector lock; only a free
    // lock means they are leftovers of a crash.
    let lock: CollectorLock?
    do {
      lock = try CollectorLock.acquire(in: blobs.root, create: false, catalog: catalog)
    } catch MaintenanceError.collectorBusy {
      return report
    }
    // A missing lock file means no collector ever ran here. Either way the leftovers are
    // rechecked under the catalog's write lock.
    defer { lock?.release() }
    let recovered: ContentRecovery
    do {
      recovered = try content.recover(dryRun: false)
    } catch LarderError.blobStoreUnavailable(let detail) {
      // A blob store that is down must not keep a node from starting; the next collection
      // (or open) finishes the work.
      logger.warning("what an interrupted collection left is not settled: the blob store is unavailable (\(detail))")
      return report
    }
    report.add(recovered)
    return report
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

extension RecoveryReport {
  /// Counts what a content store's recovery settled.
  mutating func add(_ recovered: ContentRecovery) {
    trashRestored += recovered.restored.count
    trashRemoved += recovered.removed.count
    deletionsFinished += recovered.finished.count
  }
}
