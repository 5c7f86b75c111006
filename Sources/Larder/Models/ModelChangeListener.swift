import Foundation
import Synchronization

/// The thread that hears other processes' and nodes' model commits while a store has observers.
///
/// **PostgreSQL.** Every model write sends `pg_notify(<store's channel>, <type>)` inside its
/// transaction, so PostgreSQL delivers it exactly when (and only if) the write commits. The
/// thread holds a connection of its own that `LISTEN`s on the channel and tells the
/// ``ObservationCenter`` which types changed. After a lost connection it reconnects and
/// refreshes every observer (a commit may have been missed).
///
/// **SQLite.** Any process's commit on the file moves the WAL-index commit stamp
/// (``Catalog/commitStamp()``: a read of 96 bytes of mapped shared memory, no connection, no
/// transaction). The thread reads it every ``stampPollInterval``; when it moved, every observed
/// type is refreshed (the stamp does not say which type, or whether the commit touched models
/// at all).
///
/// Either way the observers re-run their queries and deliver only real differences (this
/// process's own writes, heard twice, change nothing the second time). The thread ends once no
/// observer is left.
final class ModelChangeListener: Sendable {
  /// How often an observing SQLite store reads the commit stamp: the bound on how late another
  /// process's commit is noticed.
  static let stampPollInterval: Duration = .milliseconds(5)

  private let running = Mutex(false)

  func ensureRunning(catalog: Catalog, center: ObservationCenter) {
    guard claim() else { return }
    let thread = Thread { [self] in
      // An observer added while the thread was ending found it still running: start again.
      repeat {
        if catalog.isShared {
          listen(catalog: catalog, center: center)
        } else {
          watchCommitStamp(catalog: catalog, center: center)
        }
        running.withLock { $0 = false }
      } while center.count > 0 && claim()
    }
    thread.name = "larder.model-listener"
    thread.start()
  }

  private func claim() -> Bool {
    running.withLock { running -> Bool in
      defer { running = true }
      return !running
    }
  }

  private func listen(catalog: Catalog, center: ObservationCenter) {
    var connection: (any CommitAnnouncingDatabase)?
    while center.count > 0 {
      do {
        if connection == nil {
          let db = try catalog.dedicatedConnection() as? any CommitAnnouncingDatabase
          try db?.listenForModelChanges()
          connection = db
          // Anything committed while nobody listened: every observer looks again.
          center.committed(types: center.types)
        }
        guard let db = connection else { return }
        let types = try db.modelChanges(timeout: .milliseconds(500))
        center.committed(types: Set(types))
      } catch {
        connection = nil
        Thread.sleep(forTimeInterval: 0.5)
      }
    }
  }

  private func watchCommitStamp(catalog: Catalog, center: ObservationCenter) {
    var seen = catalog.commitStamp()
    // A commit between an observer's first query and this first reading would go unseen.
    center.committed(types: center.types)
    let interval = Self.stampPollInterval.timeInterval
    while center.count > 0 {
      Thread.sleep(forTimeInterval: interval)
      // nil: the header was being rewritten at that instant; the next reading tells.
      guard let stamp = catalog.commitStamp(), stamp != seen else { continue }
      seen = stamp
      center.committed(types: center.types)
    }
  }
}
