internal import CSQLite
import Foundation

/// One SQLite connection, with Larder's pragmas applied.
///
/// A connection is used by one thread at a time; ``Catalog`` hands them out.
/// ```swift
/// let db = try SQLiteDatabase(path: "larder.sqlite")
/// try db.execute("INSERT INTO t VALUES (?)", [42])
/// ```
package final class SQLiteDatabase: Database {
  package var dialect: any SQLDialect { SQLiteDialect() }
  let handle: OpaquePointer
  private var cache: [String: Statement] = [:]
  package let path: String

  /// Opens (creating if needed) the database at `path`.
  /// - Throws: ``DatabaseError`` if SQLite cannot open it or a pragma fails.
  package init(path: String, readOnly: Bool = false, busyTimeout: Duration = .seconds(30)) throws(DatabaseError) {
    self.path = path
    var db: OpaquePointer?
    let flags =
      (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
    let result = sqlite3_open_v2(path, &db, flags, nil)
    guard result == SQLITE_OK, let db else {
      let error = DatabaseError(
        extendedCode: result, message: db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open", sql: nil)
      sqlite3_close_v2(db)
      throw error
    }
    handle = db
    sqlite3_extended_result_codes(db, 1)
    let ms = busyTimeout.components.seconds * 1000 + busyTimeout.components.attoseconds / 1_000_000_000_000_000
    try check(sqlite3_busy_timeout(db, Int32(clamping: ms)), db)
    if !readOnly { try execute("PRAGMA journal_mode=WAL", []) }
    try execute("PRAGMA synchronous=FULL", [])
    try execute("PRAGMA foreign_keys=ON", [])
  }

  deinit {
    cache.removeAll()
    sqlite3_close_v2(handle)
  }

  /// A cached prepared statement for `sql`.
  package func statement(_ sql: String) throws(DatabaseError) -> Statement {
    if let cached = cache[sql] {
      cached.reset()
      return cached
    }
    let statement = try Statement(database: self, sql: sql)
    cache[sql] = statement
    return statement
  }

  /// Runs one statement to completion.
  package func execute(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) {
    let s = try statement(sql)
    try s.bind(arguments)
    while try s.step() {}
    s.reset()
  }

  /// Copies the database as of one read transaction into a new file at `path` with SQLite's
  /// online backup API: its pages as they are, no table or index rebuilt (`VACUUM INTO` rebuilds
  /// both); writers go on meanwhile (WAL).
  package func copy(to path: String) throws(DatabaseError) {
    var target: OpaquePointer?
    let opened = sqlite3_open_v2(path, &target, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
    defer { sqlite3_close_v2(target) }
    try check(opened, target)
    guard let backup = sqlite3_backup_init(target, "main", handle, "main") else {
      throw DatabaseError(
        extendedCode: sqlite3_extended_errcode(target), message: String(cString: sqlite3_errmsg(target)), sql: nil)
    }
    let stepped = sqlite3_backup_step(backup, -1)
    let finished = sqlite3_backup_finish(backup)
    try check(stepped == SQLITE_DONE ? finished : stepped, target)
  }

  /// Runs several `;`-separated statements without arguments (migrations).
  package func executeScript(_ sql: String) throws(DatabaseError) {
    var message: UnsafeMutablePointer<CChar>?
    let result = sqlite3_exec(handle, sql, nil, nil, &message)
    if result != SQLITE_OK {
      let text = message.map { String(cString: $0) } ?? "error"
      sqlite3_free(message)
      throw DatabaseError(extendedCode: sqlite3_extended_errcode(handle), message: text, sql: sql)
    }
  }

  /// All rows of a query.
  package func rows(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) -> [Row] {
    let s = try statement(sql)
    try s.bind(arguments)
    var out = [Row]()
    while try s.step() { out.append(s.row()) }
    s.reset()
    return out
  }

  /// The first row of a query, if any.
  package func row(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) -> Row? {
    let s = try statement(sql)
    try s.bind(arguments)
    defer { s.reset() }
    return try s.step() ? s.row() : nil
  }

  /// Visits rows one at a time, for scans too large to hold.
  package func forEachRow(
    _ sql: String, _ arguments: [any SQLBindable], _ body: (Row) throws -> Void
  ) throws {
    let s = try Statement(database: self, sql: sql)
    try s.bind(arguments)
    while try s.step() { try body(s.row()) }
  }

  /// Rows changed by the last INSERT, UPDATE or DELETE.
  package var changes: Int { Int(sqlite3_changes(handle)) }

  package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

  /// Runs `body` in a transaction that commits if it returns and rolls back if it throws.
  ///
  /// `immediate` takes SQLite's write lock at once (`BEGIN IMMEDIATE`): every decision made inside
  /// is then made with no other writer, in this process or another.
  /// WAL with `synchronous=NORMAL` for the duration: a commit appends to the log without
  /// fsync (the next checkpoint or FULL commit syncs it). Set between transactions only.
  package func committingLazily<T>(_ body: () throws -> T) throws -> T {
    try execute("PRAGMA synchronous=NORMAL", [])
    defer { try? execute("PRAGMA synchronous=FULL", []) }
    return try body()
  }

  package func transaction<T>(immediate: Bool, _ body: (Database) throws -> T) throws -> T {
    try execute(immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED", [])
    do {
      let value = try body(self)
      try execute("COMMIT", [])
      return value
    } catch {
      // The body's error is the one to report; a failed ROLLBACK leaves SQLite to roll back.
      if isInTransaction { try? execute("ROLLBACK", []) }
      throw error
    }
  }
}

@available(*, unavailable)
extension SQLiteDatabase: Sendable {}
