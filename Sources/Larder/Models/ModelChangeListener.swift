import Foundation
import Synchronization

/// On a PostgreSQL catalog, the thread that hears other processes' and nodes' model commits.
///
/// Every model write sends `pg_notify(<store's channel>, <type>)` inside its transaction, so
/// PostgreSQL delivers it exactly when (and only if) the write commits. While this store has
/// observers, one thread holds a connection of its own that `LISTEN`s on the channel and tells
/// the ``ObservationCenter`` which types changed; the observers re-run their queries and deliver
/// only real differences (this process's own writes, heard twice, change nothing the second
/// time). The thread ends, closing its connection, once no observer is left; after a lost
/// connection it reconnects and refreshes every observer (a commit may have been missed).
final class ModelChangeListener: Sendable {
  private let running = Mutex(false)

  func ensureRunning(catalog: Catalog, center: ObservationCenter) {
    let start = running.withLock { running -> Bool in
      defer { running = true }
      return !running
    }
    guard start else { return }
    let thread = Thread { [self] in
      listen(catalog: catalog, center: center)
      running.withLock { $0 = false }
    }
    thread.name = "larder.model-listener"
    thread.start()
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
}
