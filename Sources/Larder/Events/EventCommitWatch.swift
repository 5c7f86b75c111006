import Foundation

/// Waits for commits that may have written events, from this process or any other.
///
/// SQLite: any commit moves the WAL-index commit stamp (``Catalog/commitStamp()``), read every
/// few milliseconds (a read of mapped memory; no connection). PostgreSQL: a connection of its
/// own `LISTEN`s on the store's channel, where every change announces its events at commit
/// (``ObjectChangeOutbox/announcement``). A caller still polls on a floor of its own: a lost
/// connection or a torn stamp must only delay, never lose, a wake-up.
///
/// Used by one thread at a time.
package final class EventCommitWatch {
  private let catalog: Catalog
  private var feed: (any CommitFeed)?

  package init(events: ObjectEvents) {
    catalog = events.catalog
    feed = catalog.commitFeed(poll: .milliseconds(3))
  }

  /// Returns when something may have been committed since the last call, or after `timeout`.
  package func wait(timeout: Duration) {
    let deadline = ContinuousClock.now + timeout
    do {
      while ContinuousClock.now < deadline {
        let current = feed ?? catalog.commitFeed(poll: .milliseconds(3))
        feed = current
        switch try current.next(timeout: min(.milliseconds(500), deadline - .now)) {
        case .unknown: return
        case .announced(let heard): if heard.contains(ObjectChangeOutbox.announcement) { return }
        }
      }
    } catch {
      feed = nil
      Thread.sleep(forTimeInterval: min(0.2, timeout.timeInterval))
    }
  }
}
