import Foundation
import Synchronization

/// The thread that hears other processes' and nodes' model commits while a store has observers,
/// through the catalog's ``CommitFeed``.
///
/// **PostgreSQL.** Every model write sends `pg_notify(<store's channel>, <type>)` inside its
/// transaction, so the feed hears exactly the types that committed. **SQLite.** Any process's
/// commit moves the WAL-index commit stamp (``Catalog/commitStamp()``: a read of mapped shared
/// memory), which the feed reads every ``stampPollInterval``; it does not say which type, so
/// every observed type is refreshed. After a lost connection, a new feed starts by refreshing
/// every observer (a commit may have been missed).
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
        listen(catalog: catalog, center: center)
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
    var feed: (any CommitFeed)?
    while center.count > 0 {
      do {
        let current = feed ?? catalog.commitFeed(poll: Self.stampPollInterval)
        feed = current
        switch try current.next(timeout: .milliseconds(500)) {
        case .unknown: center.committed(types: center.types)
        case .announced(let types): if !types.isEmpty { center.committed(types: types) }
        }
      } catch {
        feed = nil
        Thread.sleep(forTimeInterval: 0.5)
      }
    }
  }
}
