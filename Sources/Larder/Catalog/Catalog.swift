import Foundation

/// The metadata catalog: one writer connection and a small pool of readers over one SQLite file.
///
/// All writes go through ``write(_:)``, which runs the closure in a `BEGIN IMMEDIATE` transaction
/// on the single writer connection, so a write in this process never interleaves with another, and
/// SQLite's lock serialises it against other processes (the CLI beside a running server).
/// Reads use their own WAL snapshot and never wait behind a write.
/// ```swift
/// try catalog.write { db in try db.execute("DELETE FROM uploads WHERE expires_at < ?", [now]) }
/// let count = try catalog.read { db in try db.row("SELECT count(*) AS n FROM blobs")?.int("n") }
/// ```
package final class Catalog: @unchecked Sendable {
  package let path: String
  private let writerLock = NSLock()
  private let writer: Database
  private let readerLock = NSLock()
  private var idleReaders: [Database] = []
  private let maxIdleReaders: Int
  /// Space given back when a write finds the disk full (see ``SpaceReserve``).
  let reserve: SpaceReserve?

  /// Opens the catalog at `path`, creating it and running migrations as needed.
  /// - Throws: ``DatabaseError`` when SQLite fails, ``LarderError/catalogTooNew(version:supported:)``
  ///   when a newer Larder wrote the file.
  init(path: String, maxIdleReaders: Int = 8, reserve: SpaceReserve? = nil) throws {
    self.path = path
    self.maxIdleReaders = maxIdleReaders
    self.reserve = reserve
    writer = try Self.openWriter(path: path, reserve: reserve)
    try Migrations.run(on: writer)
  }

  private static func openWriter(path: String, reserve: SpaceReserve?) throws -> Database {
    do {
      return try Database(path: path)
    } catch {
      // Opening may need room for the shared-memory index: a full disk must not lock us out.
      guard error.isDiskFull, let reserve, reserve.release() else { throw error }
      return try Database(path: path)
    }
  }

  /// Runs `body` inside one immediate write transaction; any thrown error rolls it back.
  ///
  /// When the disk is full (SQLite cannot grow its log, typically at COMMIT) and
  /// `releasingReserve` is true, the reserve is given back and `body` runs once more in a new
  /// transaction: deletes and the collector, which free space, still commit on a full disk.
  /// Writes that add content pass false.
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
  package func read<T>(snapshot: Bool = true, _ body: (Database) throws -> T) throws -> T {
    let db = try checkoutReader()
    defer { checkin(db) }
    return snapshot ? try db.transaction(immediate: false, body) : try body(db)
  }

  /// Moves the write-ahead log into the database file and truncates it, so a stopped service
  /// leaves one self-contained `larder.sqlite` behind (another process may still hold readers).
  package func checkpoint() throws {
    writerLock.lock()
    defer { writerLock.unlock() }
    try writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
  }

  private func checkoutReader() throws -> Database {
    readerLock.lock()
    if let db = idleReaders.popLast() {
      readerLock.unlock()
      return db
    }
    readerLock.unlock()
    return try Database(path: path)
  }

  private func checkin(_ db: Database) {
    readerLock.lock()
    defer { readerLock.unlock() }
    if idleReaders.count < maxIdleReaders { idleReaders.append(db) }
  }
}
