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
/// the caller: only the row is cached.
///
/// ```swift
/// let object = try catalog.read(snapshot: false) { db in
///   try cache.object(at: path, db: db) { try ObjectStore.fetch(db: db, bucket: $0.bucket, name: $0.name) }
/// }
/// ```
final class ObjectCache: Sendable {
  private struct State {
    var entries: [ObjectPath: Entry] = [:]
    /// Small blobs' whole content by hex SHA-256, and their total size.
    var contents: [String: [UInt8]] = [:]
    var contentBytes = 0
    /// Bumped at every clear: a miss read before a clear must not be stored after it.
    var epoch: UInt64 = 0
  }

  /// Entries kept at most; a full cache is emptied rather than tracked for recency (the hot
  /// set of a small-download workload refills in one request each).
  let capacity: Int
  private let state = Mutex(State())

  /// Bytes of content kept at most; a full store of contents is emptied like the rows.
  let contentCapacity: Int

  init(capacity: Int = 4096, contentCapacity: Int = 8 << 20) {
    self.capacity = capacity
    self.contentCapacity = contentCapacity
  }

  /// A cached row and what callers derived from it.
  struct Entry: Sendable {
    let object: StoredObject?
    let memo: ObjectMemo
  }

  /// The object at `path` (nil for none), from the cache when the catalog is unchanged since it
  /// was read, else from `fetch`, which must read through `db`.
  func object(
    at path: ObjectPath, db: Database, fetch: (ObjectPath) throws -> StoredObject?
  ) throws -> StoredObject? {
    try entry(at: path, db: db, fetch: fetch).object
  }

  /// ``object(at:db:fetch:)`` with the row's ``ObjectMemo``: values derived from this row,
  /// dropped with it. A row read but not kept (the cache was emptied meanwhile) gets a memo
  /// of its own that nothing else sees.
  func entry(
    at path: ObjectPath, db: Database, fetch: (ObjectPath) throws -> StoredObject?
  ) throws -> Entry {
    // A catalog that cannot tell whether anyone committed (PostgreSQL, shared by other
    // nodes) is never cached: every lookup reads the row, with a memo of its own.
    guard let version = try db.dataVersion() else { return Entry(object: try fetch(path), memo: ObjectMemo()) }
    let changed = db.lastCheckedDataVersion != version
    db.lastCheckedDataVersion = version
    let (hit, epoch) = state.withLock { s -> (Entry?, UInt64) in
      if changed {
        s.entries.removeAll(keepingCapacity: true)
        s.contents.removeAll(keepingCapacity: true)
        s.contentBytes = 0
        s.epoch &+= 1
        return (nil, s.epoch)
      }
      return (s.entries[path], s.epoch)
    }
    if let hit { return hit }
    let entry = Entry(object: try fetch(path), memo: ObjectMemo())
    state.withLock { s in
      guard s.epoch == epoch else { return }
      if s.entries.count >= capacity { s.entries.removeAll(keepingCapacity: true) }
      s.entries[path] = entry
    }
    return entry
  }

  /// The content of the blob `sha256` (hex) when it was stored since the rows were last
  /// emptied, with the epoch to pass to ``storeContent(_:sha256:epoch:)`` after a miss.
  func content(sha256: String) -> (bytes: [UInt8]?, epoch: UInt64) {
    state.withLock { s in (s.contents[sha256], s.epoch) }
  }

  /// Keeps `bytes` as the content of `sha256`, unless the rows were emptied since `epoch` (the
  /// read may have raced a quarantine) or they would not fit.
  func storeContent(_ bytes: [UInt8], sha256: String, epoch: UInt64) {
    guard bytes.count <= contentCapacity else { return }
    state.withLock { s in
      guard s.epoch == epoch, s.contents[sha256] == nil else { return }
      if s.contentBytes + bytes.count > contentCapacity {
        s.contents.removeAll(keepingCapacity: true)
        s.contentBytes = 0
      }
      s.contents[sha256] = bytes
      s.contentBytes += bytes.count
    }
  }

  /// Entries held now (for tests).
  var count: Int { state.withLock { $0.entries.count } }

  /// Blob contents held now (for tests).
  var contentCount: Int { state.withLock { $0.contents.count } }
}

/// Values a caller derives from one cached object row (a download's prepared headers, the
/// metadata JSON), kept exactly as long as the row is cached: a commit that empties the cache
/// drops them with it, so they are never older than the row they were made from.
///
/// ```swift
/// let (object, memo) = try larder.objects.findMemoized(path)
/// let head = memo.value { DownloadHead(object!) }   // made once per cached row
/// ```
public final class ObjectMemo: Sendable {
  private let values = Mutex<[ObjectIdentifier: any Sendable]>([:])

  init() {}

  /// The value of type `T` made for this row, made now by `make` if there is none yet. Two
  /// threads may both make it; one result is kept, and both are equal by construction.
  public func value<T: Sendable>(_ make: () throws -> T) rethrows -> T {
    let key = ObjectIdentifier(T.self)
    if let known = values.withLock({ $0[key] }) as? T { return known }
    let made = try make()
    values.withLock { $0[key] = made }
    return made
  }
}
