import Foundation

/// The metadata catalog: writer connections and a small pool of readers, over one SQLite file
/// or one PostgreSQL database (see ``CatalogLocation``).
///
/// All writes go through ``write(keys:releasingReserve:_:)``, which runs the closure in a write
/// transaction. On SQLite there is one writer connection and `BEGIN IMMEDIATE`: one write at a
/// time, across threads and processes. On PostgreSQL a pool of writer connections
/// (``Larder/Configuration/catalogWriters``) runs writes together as far as their locks allow:
/// a write given ``WriteKey``s holds the store's advisory lock shared and each key exclusively,
/// so writes of different contents, names and uploads commit concurrently while two writes of
/// one key (an upload deduping against a blob and the collector deleting it) never interleave;
/// a write without keys holds the store's lock exclusively and runs alone, across every node
/// (ARCHITECTURE.md, "Keyed write locks"). Reads use their own snapshot and never wait behind a
/// write.
/// ```swift
/// try catalog.write { db in try db.execute("DELETE FROM uploads WHERE expires_at < ?", [now]) }
/// try catalog.write(keys: [.upload(id: id)]) { db in try db.execute("UPDATE uploads SET … WHERE id = ?", [id]) }
/// let count = try catalog.read { db in try db.row("SELECT count(*) AS n FROM blobs")?.int("n") }
/// ```
package final class Catalog: @unchecked Sendable {
  package let location: CatalogLocation
  /// What the catalog is built on; everything that differs between catalogs is asked of it.
  package let engine: any CatalogEngine
  package let dialect: any SQLDialect
  /// The one writer is used under this lock; with concurrent writers it guards `idleWriters`.
  private let writerLock = NSLock()
  /// The one writer; with concurrent writers the first of the pool (it ran the migrations).
  private let writer: Database
  /// With concurrent writers: writer connections not in use (`writer` among them at first).
  private var idleWriters: [Database] = []
  /// With concurrent writers: at most this many writer connections are open at once.
  private let writerSlots: DispatchSemaphore?
  /// How long writes waited for their locks and held them (``CatalogLockTimes``).
  let lockClock = CatalogLockClock()
  private let readerLock = NSLock()
  private var idleReaders: [Database] = []
  private let maxIdleReaders: Int
  /// At most this many reader connections are open at once where each is a server process
  /// (``CatalogEngine/readerLimit``); a read beyond them waits for one.
  private let readerSlots: DispatchSemaphore?
  private let readOnly: Bool
  /// Space given back when a write finds the disk full (see ``SpaceReserve``).
  let reserve: SpaceReserve?
  /// Reads the engine's commit counter, if it has one (see ``commitStamp()``).
  private let commitWatch: (@Sendable () -> Int64?)?
  /// Told of every statement of ``read(snapshot:_:)`` and ``write(keys:releasingReserve:durable:_:)`` (tests count them).
  private let observer: (any CatalogObserver)?

  /// Writer connections a catalog with concurrent writers opens at most, unless configured otherwise.
  package static let defaultPostgresWriters = 8

  /// Opens the SQLite catalog at `path`, creating it and running migrations as needed.
  /// - Throws: ``DatabaseError`` when SQLite fails, ``LarderError/catalogTooNew(version:supported:)``
  ///   when a newer Larder wrote the file.
  convenience init(path: String, maxIdleReaders: Int = 8, reserve: SpaceReserve? = nil) throws {
    try self.init(
      location: .dataDirectory, sqlitePath: path, backends: .embedded, maxIdleReaders: maxIdleReaders, reserve: reserve)
  }

  /// Opens the catalog at `location` (`sqlitePath` for ``CatalogLocation/dataDirectory``), with
  /// the engine `backends` has for it; an engine with concurrent writers opens up to `writers`
  /// writer connections (SQLite has one).
  init(
    location: CatalogLocation, sqlitePath: String, backends: StoreBackends, maxIdleReaders: Int = 8,
    reserve: SpaceReserve? = nil, writers: Int = Catalog.defaultPostgresWriters, readOnly: Bool = false,
    observer: (any CatalogObserver)? = nil
  ) throws {
    self.observer = observer
    self.location = location
    self.maxIdleReaders = maxIdleReaders
    self.reserve = reserve
    self.readOnly = readOnly
    // The one place the catalog's kind is decided.
    switch location {
    case .dataDirectory:
      engine = SQLiteCatalogEngine(path: sqlitePath)
    case .postgres:
      guard let open = backends.postgres else {
        throw LarderError.invalidArgument(
          "a PostgreSQL catalog needs the LarderPostgres module: open the store with backends: [.postgres]")
      }
      engine = try open(location)
    }
    dialect = engine.dialect
    readerSlots = engine.readerLimit.map { DispatchSemaphore(value: $0) }
    writerSlots = engine.concurrentWriters ? DispatchSemaphore(value: max(1, writers)) : nil
    let writer: Database
    do {
      writer = try engine.connect(readOnly: readOnly)
    } catch {
      // Opening may need room for SQLite's shared-memory index: a full disk must not lock us out.
      guard Self.isDiskFull(error), let reserve, reserve.release() else { throw error }
      writer = try engine.connect(readOnly: readOnly)
    }
    if readOnly {
      try Self.requireCurrent(version: engine.schemaVersion(writer))
      commitWatch = nil
    } else {
      try engine.migrate(writer)
      commitWatch = engine.commitStamp(on: writer)
    }
    self.writer = writer
    if engine.concurrentWriters { idleWriters = [writer] }
  }

  /// A read-only open never migrates: a catalog at another version than this Larder writes is
  /// refused, saying what to run.
  private static func requireCurrent(version: Int) throws {
    let current = Migrations.all.count
    if version > current { throw LarderError.catalogTooNew(version: version, supported: current) }
    if version < current {
      throw LarderError.invalidArgument(
        "the catalog has schema version \(version) and this Larder writes \(current): it needs migrating, "
          + "which a read-only open (a dry run) does not do; run `larder catalog migrate` (or any command "
          + "that writes) first")
    }
  }

  /// A value that moves whenever anyone, in this process or another, commits to the catalog, so
  /// equal stamps mean nothing was committed in between; nil when that cannot be told cheaply
  /// right now (PostgreSQL, where another node's commit is a round trip away, or a SQLite header
  /// that stayed torn): the caller must then not trust anything it cached.
  ///
  /// A read of the mapped WAL-index header (``WALIndexWatch``): no connection, no transaction.
  package func commitStamp() -> Int64? { commitWatch?() }

  /// Runs `body` inside one write transaction; any thrown error rolls it back.
  ///
  /// With no `keys` the transaction runs alone: no other write, in this process or another, on
  /// this node or another, runs beside it. With `keys` (PostgreSQL) it runs beside writes whose
  /// keys are all different and beside no unkeyed write; `body` must then read and change only
  /// what its keys name (``WriteKey``), or rows that only unkeyed writes change. On SQLite keys
  /// change nothing: every write runs alone.
  ///
  /// When the disk is full (SQLite cannot grow its log, typically at COMMIT) and
  /// `releasingReserve` is true, the reserve is given back and `body` runs once more in a new
  /// transaction: deletes and the collector, which free space, still commit on a full disk.
  /// Writes that add content pass false.
  ///
  /// `durable: false` commits lazily (``Database/committingLazily(_:)``): only for bookkeeping
  /// that is redone when a machine crash loses it.
  @discardableResult
  package func write<T>(
    keys: [WriteKey] = [], releasingReserve: Bool = true, durable: Bool = true, _ body: (Database) throws -> T
  ) throws -> T {
    let asked = ContinuousClock.now
    return try withWriter { writer in
      func commit() throws -> T {
        let value: T
        do {
          value = try transaction(on: writer, keys: keys, asked: asked, body)
        } catch {
          guard releasingReserve, Self.isDiskFull(error), let reserve, reserve.release() else { throw error }
          value = try transaction(on: writer, keys: keys, asked: asked, body)
        }
        reserve?.replenish()
        return value
      }
      return durable ? try commit() : try writer.committingLazily(commit)
    }
  }

  /// One write transaction on `writer`, keyed where the connection can be, timed from its
  /// locks' grant to its COMMIT's return (``CatalogLockTimes``).
  private func transaction<T>(
    on writer: Database, keys: [WriteKey], asked: ContinuousClock.Instant, _ body: (Database) throws -> T
  ) throws -> T {
    let keyedWriter = keys.isEmpty ? nil : writer as? KeyedWriteDatabase
    var granted: ContinuousClock.Instant?
    func timed(_ db: Database) throws -> T {
      granted = .now
      return try body(ObservedDatabase.wrap(db, observer))
    }
    defer {
      if let granted {
        lockClock.record(keyed: keyedWriter != nil, waited: granted - asked, held: .now - granted)
      }
    }
    if let keyedWriter { return try keyedWriter.transaction(locking: Set(keys), timed) }
    return try writer.transaction(immediate: true, timed)
  }

  /// Runs `body` with a writer connection: SQLite's one (under `writerLock`), or one of
  /// PostgreSQL's pool (opened when none is idle, at most `writerSlots` at once). A pooled
  /// connection the server dropped is reset by its next transaction, so it goes back either way.
  private func withWriter<T>(_ body: (Database) throws -> T) throws -> T {
    guard let writerSlots else {
      writerLock.lock()
      defer { writerLock.unlock() }
      return try body(writer)
    }
    writerSlots.wait()
    defer { writerSlots.signal() }
    let pooled = writerLock.withLock { idleWriters.popLast() }
    let db = try pooled ?? engine.connect(readOnly: readOnly)
    defer { writerLock.withLock { idleWriters.append(db) } }
    return try body(db)
  }

  /// How long this process's writes waited for and held their locks, since it opened the store.
  var lockTimes: CatalogLockTimes { lockClock.snapshot }

  private static func isDiskFull(_ error: any Error) -> Bool {
    (error as? DatabaseError)?.isDiskFull == true || (error as? LarderError) == .diskFull
  }

  /// Runs `body` on a reader connection inside one read transaction (a consistent snapshot).
  ///
  /// With `snapshot: false` no transaction is opened: for a body that runs a single statement,
  /// which SQLite already reads from one snapshot, this saves a BEGIN and a COMMIT.
  /// On PostgreSQL a read that fails because the connection was lost is retried once on a new
  /// connection (a read changes nothing, so repeating it is safe).
  package func read<T>(snapshot: Bool = true, _ body: (Database) throws -> T) throws -> T {
    do {
      return try readOnce(snapshot: snapshot, body)
    } catch let error as DatabaseError where error.isConnectionLost {
      return try readOnce(snapshot: snapshot, body)
    }
  }

  private func readOnce<T>(snapshot: Bool, _ body: (Database) throws -> T) throws -> T {
    readerSlots?.wait()
    defer { readerSlots?.signal() }
    let db = try checkoutReader()
    var healthy = true
    defer { if healthy { checkin(db) } }
    do {
      let observer = observer
      func observed(_ db: Database) throws -> T { try body(ObservedDatabase.wrap(db, observer)) }
      return snapshot ? try db.transaction(immediate: false, observed) : try observed(db)
    } catch let error as DatabaseError where error.isConnectionLost {
      // The server went away: the idle connections went with it.
      healthy = false
      readerLock.withLock { idleReaders.removeAll() }
      throw error
    }
  }

  /// Moves the write-ahead log into the database file and truncates it, so a stopped service
  /// leaves one self-contained `larder.sqlite` behind (another process may still hold readers);
  /// nothing to do for an engine without a log of its own.
  package func checkpoint() throws {
    writerLock.lock()
    defer { writerLock.unlock() }
    try engine.checkpoint(writer)
  }

  /// A connection of its own, outside the pool (a listener, or a session holding a lock).
  package func dedicatedConnection() throws -> Database { try engine.connect(readOnly: readOnly) }

  /// Hears of commits from any process or node (``CatalogEngine/commitFeed(catalog:poll:)``).
  package func commitFeed(poll: Duration) -> any CommitFeed { engine.commitFeed(catalog: self, poll: poll) }

  private func checkoutReader() throws -> Database {
    readerLock.lock()
    if let db = idleReaders.popLast() {
      readerLock.unlock()
      return db
    }
    readerLock.unlock()
    return try engine.connect(readOnly: readOnly)
  }

  private func checkin(_ db: Database) {
    readerLock.lock()
    defer { readerLock.unlock() }
    if idleReaders.count < maxIdleReaders { idleReaders.append(db) }
  }
}
