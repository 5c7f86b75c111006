import Synchronization

/// The objects this process looked up lately, so a hot download skips the catalog's join.
///
/// An entry is served only while nobody has committed to the catalog since it was read: every
/// lookup first reads the catalog's commit stamp (``Catalog/commitStamp()``, which moves at any
/// commit, by this process's writer or by another process on the same directory), and a stamp
/// other than the last one seen empties the whole cache. The stamp is read before the row, so a
/// lookup that starts after a commit has returned never gets an entry read before it; an entry
/// read concurrently with the clear is refused by the epoch it carries. Without a stamp
/// (PostgreSQL) nothing is served from the cache. Rules and download tokens are still checked
/// per request by the caller: only the row is cached.
///
/// ```swift
/// let entry = try cache.entry(at: path, stamp: catalog.commitStamp()) { path in
///   try catalog.read(snapshot: false) { db in try ObjectStore.fetch(db: db, bucket: path.bucket, name: path.name) }
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
    /// The commit stamp the entries were read under.
    var stamp: Int64?
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

  /// The object at `path` (nil for none) with its ``ObjectMemo``: from the cache when `stamp`
  /// (read before calling) is the one the entries were read under, else from `fetch`. A nil
  /// `stamp` (the catalog cannot tell whether anyone committed) always fetches, with a memo of
  /// its own that nothing else sees; so does a row read but not kept (the cache was emptied
  /// meanwhile).
  func entry(at path: ObjectPath, stamp: Int64?, fetch: (ObjectPath) throws -> StoredObject?) throws -> Entry {
    guard let stamp else { return Entry(object: try fetch(path), memo: ObjectMemo()) }
    let (hit, epoch) = state.withLock { s -> (Entry?, UInt64) in
      if s.stamp != stamp {
        s.entries.removeAll(keepingCapacity: true)
        s.contents.removeAll(keepingCapacity: true)
        s.contentBytes = 0
        s.epoch &+= 1
        s.stamp = stamp
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
  @usableFromInline let values = Mutex<[ObjectIdentifier: any Sendable]>([:])

  init() {}

  /// The value of type `T` made for this row, made now by `make` if there is none yet. Two
  /// threads may both make it; one result is kept, and both are equal by construction.
  /// (Inlinable: specialized where `T` is known, the cast costs no runtime generic lookups on
  /// every small GET.)
  @inlinable
  public func value<T: Sendable>(_ make: () throws -> T) rethrows -> T {
    let key = ObjectIdentifier(T.self)
    if let known = values.withLock({ $0[key] }) as? T { return known }
    let made = try make()
    values.withLock { $0[key] = made }
    return made
  }
}
