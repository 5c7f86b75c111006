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
  private var stamp: Int64?
  private var connection: (any CommitAnnouncingDatabase)?

  package init(events: ObjectEvents) {
    catalog = events.catalog
    stamp = catalog.commitStamp()
  }

  /// Returns when something may have been committed since the last call, or after `timeout`.
  package func wait(timeout: Duration) {
    let deadline = ContinuousClock.now + timeout
    if catalog.isShared {
      do {
        if connection == nil {
          let db = try catalog.dedicatedConnection() as? any CommitAnnouncingDatabase
          try db?.listenForModelChanges()
          connection = db
          return  // anything committed while nobody listened
        }
        guard let connection else { return Thread.sleep(forTimeInterval: timeout.timeInterval) }
        while ContinuousClock.now < deadline {
          let heard = try connection.modelChanges(timeout: min(.milliseconds(500), deadline - .now))
          if heard.contains(ObjectChangeOutbox.announcement) { return }
        }
      } catch {
        connection = nil
        Thread.sleep(forTimeInterval: min(0.2, timeout.timeInterval))
      }
      return
    }
    while ContinuousClock.now < deadline {
      if let now = catalog.commitStamp(), now != stamp {
        stamp = now
        return
      }
      Thread.sleep(forTimeInterval: 0.003)
    }
  }
}
