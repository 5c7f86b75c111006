import Foundation

/// The metadata catalog: one writer connection and a small pool of readers, over one SQLite
/// file or one PostgreSQL database (see ``CatalogLocation``).
///
/// All writes go through ``write(_:)``, which runs the closure in a write transaction on the
/// single writer connection, so a write in this process never interleaves with another. Across
/// processes and nodes the catalog's one write lock serialises them: SQLite's `BEGIN IMMEDIATE`,
/// or on PostgreSQL a transaction-level advisory lock taken right after `BEGIN` (ARCHITECTURE
/// §5: the dedupe decision and the collector's delete never interleave, wherever they run).
/// Reads use their own snapshot and never wait behind a write.
/// ```swift
/// try catalog.write { db in try db.execute("DELETE FROM uploads WHERE expires_at < ?", [now]) }
/// let count = try catalog.read { db in try db.row("SELECT count(*) AS n FROM blobs")?.int("n") }
/// ```
package final class Catalog: @unchecked Sendable {
  /// The SQLite file; empty on PostgreSQL.
  package let path: String
  package let location: CatalogLocation
  package let dialect: SQLDialect
  private let writerLock = NSLock()
  private let writer: Database
  private let readerLock = NSLock()
  private var idleReaders: [Database] = []
  private let maxIdleReaders: Int
  /// On PostgreSQL, at most this many reader connections are open at once (each is a server
  /// process); a read beyond them waits for one. SQLite's readers are cheap and unbounded.
  private let readerSlots: DispatchSemaphore?
  /// How a new connection is made (a closure so the pool is the same for both catalogs).
  private let connect: () throws -> Database
  /// Space given back when a write finds the disk full (see ``SpaceReserve``).
  let reserve: SpaceReserve?
  /// Reads SQLite's commit counter; nil on PostgreSQL (see ``commitStamp()``).
  private let commitWatch: WALIndexWatch?

  /// Opens the SQLite catalog at `path`, creating it and running migrations as needed.
  /// - Throws: ``DatabaseError`` when SQLite fails, ``LarderError/catalogTooNew(version:supported:)``
  ///   when a newer Larder wrote the file.
  convenience init(path: String, maxIdleReaders: Int = 8, reserve: SpaceReserve? = nil) throws {
    try self.init(
      location: .dataDirectory, sqlitePath: path, backends: .embedded, maxIdleReaders: maxIdleReaders, reserve: reserve)
  }

  /// Opens the catalog at `location` (`sqlitePath` for ``CatalogLocation/dataDirectory``), with
  /// the engine `backends` has for it.
  init(
    location: CatalogLocation, sqlitePath: String, backends: StoreBackends, maxIdleReaders: Int = 8,
    reserve: SpaceReserve? = nil
  ) throws {
    self.location = location
    self.maxIdleReaders = maxIdleReaders
    self.reserve = reserve
    switch location {
    case .dataDirectory:
      path = sqlitePath
      dialect = .sqlite
      readerSlots = nil
      connect = { try SQLiteDatabase(path: sqlitePath) }
      let writer = try Self.openWriter(path: sqlitePath, reserve: reserve)
      try Migrations.run(on: writer)
      self.writer = writer
      // The writer has put the file in WAL mode and read it, so its index is mapped now.
      commitWatch = (writer as? SQLiteDatabase).flatMap { WALIndexWatch(connection: $0) }
    case .postgres:
      guard let open = backends.postgres else {
        throw LarderError.invalidArgument(
          "a PostgreSQL catalog needs the LarderPostgres module: open the store with backends: [.postgres]")
      }
      let engine = try open(location)
      path = ""
      dialect = engine.dialect
      readerSlots = engine.readerLimit.map { DispatchSemaphore(value: $0) }
      connect = { try engine.connect() }
      commitWatch = nil
      let writer = try engine.connect()
      try engine.migrate(writer)
      self.writer = writer
    }
  }

  /// A value that moves whenever anyone, in this process or another, commits to the catalog, so
  /// equal stamps mean nothing was committed in between; nil when that cannot be told cheaply
  /// right now (PostgreSQL, where another node's commit is a round trip away, or a SQLite header
  /// that stayed torn): the caller must then not trust anything it cached.
  ///
  /// A read of the mapped WAL-index header (``WALIndexWatch``): no connection, no transaction.
  package func commitStamp() -> Int64? { commitWatch?.stamp() }

  private static func openWriter(path: String, reserve: SpaceReserve?) throws -> Database {
    do {
      return try SQLiteDatabase(path: path)
    } catch {
      // Opening may need room for the shared-memory index: a full disk must not lock us out.
      guard error.isDiskFull, let reserve, reserve.release() else { throw error }
      return try SQLiteDatabase(path: path)
    }
  }

  /// Runs `body` inside one immediate write transaction; any thrown error rolls it back.
  ///
  /// When the disk is full (SQLite cannot grow its log, typically at COMMIT) and
  /// `releasingReserve` is true, the reserve is given back and `body` runs once more in a new
  /// transaction: deletes and the collector, which free space, still commit on a full disk.
  /// Writes that add content pass false.
  @discardableResult
  package func write<T>(releasingReserve: Bool = true, _ body: (Database) throws -> T) throws -> T {
    writerLock.lock()
    defer { writerLock.unlock() }
    let value: T
    do {
      value = try writer.transaction(immediate: true, body)
    } catch {
      guard releasingReserve, Self.isDiskFull(error), let reserve, reserve.release() else { throw error }
      value = try writer.transaction(immediate: true, body)
    }
    reserve?.replenish()
    return value
  }

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
      return snapshot ? try db.transaction(immediate: false, body) : try body(db)
    } catch let error as DatabaseError where error.isConnectionLost {
      // The server went away: the idle connections went with it.
      healthy = false
      readerLock.withLock { idleReaders.removeAll() }
      throw error
    }
  }

  /// Moves the write-ahead log into the database file and truncates it, so a stopped service
  /// leaves one self-contained `larder.sqlite` behind (another process may still hold readers).
  /// Nothing to do on PostgreSQL.
  package func checkpoint() throws {
    guard dialect == .sqlite else { return }
    writerLock.lock()
    defer { writerLock.unlock() }
    try writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
  }

  /// Whether other processes on other machines may share this catalog (a catalog engine, not
  /// the data directory's SQLite file).
  package var isShared: Bool { path.isEmpty }

  /// A connection of its own, outside the pool (the collector holds its session-level
  /// advisory lock on one for a whole run).
  func dedicatedConnection() throws -> Database { try connect() }

  private func checkoutReader() throws -> Database {
    readerLock.lock()
    if let db = idleReaders.popLast() {
      readerLock.unlock()
      return db
    }
    readerLock.unlock()
    return try connect()
  }

  private func checkin(_ db: Database) {
    readerLock.lock()
    defer { readerLock.unlock() }
    if idleReaders.count < maxIdleReaders { idleReaders.append(db) }
  }
}
