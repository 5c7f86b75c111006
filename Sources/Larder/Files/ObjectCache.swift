import Synchronization

/// The objects this process looked up lately, so a hot download skips the catalog's join.
///
/// An entry is served only while no connection has committed to the catalog since it was read:
/// every lookup first asks its reader connection for `PRAGMA data_version`, which changes after
/// any commit by another connection (this process's writer, or another process on the same
/// directory). A change seen on any connection empties the whole cache. Every commit is seen by
/// the first check of each connection after it, so a lookup that starts after a commit has
/// returned never gets an entry read before it; an entry read concurrently with the clear is
/// refused by the epoch it carries. Rules and download tokens are still checked per request by
/// the caller: only the row is cached. On PostgreSQL the cache is off (see ``Database/dataVersion()``):
/// other nodes commit without any signal this process could check more cheaply than the lookup.
///
/// ```swift
/// let object = try catalog.read(snapshot: false) { db in
///   try cache.object(at: path, db: db) { try ObjectStore.fetch(db: db, bucket: $0.bucket, name: $0.name) }
/// }
/// ```
final class ObjectCache: Sendable {
  private struct State {
    var entries: [ObjectPath: StoredObject?] = [:]
    /// Bumped at every clear: a miss read before a clear must not be stored after it.
    var epoch: UInt64 = 0
  }

  /// Entries kept at most; a full cache is emptied rather than tracked for recency (the hot
  /// set of a small-download workload refills in one request each).
  let capacity: Int
  private let state = Mutex(State())

  init(capacity: Int = 4096) { self.capacity = capacity }

  /// The object at `path` (nil for none), from the cache when the catalog is unchanged since it
  /// was read, else from `fetch`, which must read through `db`.
  func object(
    at path: ObjectPath, db: Database, fetch: (ObjectPath) throws -> StoredObject?
  ) throws -> StoredObject? {
    // A catalog that cannot tell whether anyone committed (PostgreSQL, shared by other
    // nodes) is never cached: every lookup reads the row.
    guard let version = try db.dataVersion() else { return try fetch(path) }
    let changed = db.lastCheckedDataVersion != version
    db.lastCheckedDataVersion = version
    let (hit, epoch) = state.withLock { s -> (StoredObject??, UInt64) in
      if changed {
        s.entries.removeAll(keepingCapacity: true)
        s.epoch &+= 1
        return (nil, s.epoch)
      }
      return (s.entries[path], s.epoch)
    }
    if let hit { return hit }
    let object = try fetch(path)
    state.withLock { s in
      guard s.epoch == epoch else { return }
      if s.entries.count >= capacity { s.entries.removeAll(keepingCapacity: true) }
      s.entries[path] = .some(object)
    }
    return object
  }

  /// Entries held now (for tests).
  var count: Int { state.withLock { $0.entries.count } }
}
