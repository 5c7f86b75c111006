/// One catalog connection: ``SQLiteDatabase`` or ``PostgresDatabase``.
///
/// SQL is written once with `?` placeholders; the PostgreSQL connection rewrites them to
/// `$1…$n`. A connection is used by one thread at a time; ``Catalog`` hands them out.
/// ```swift
/// try catalog.write { db in try db.execute("DELETE FROM uploads WHERE id = ?", [id]) }
/// ```
package protocol Database: AnyObject {
  /// Where this connection's SQL differs from the other catalog's (see ``SQLDialect``).
  var dialect: any SQLDialect { get }
  /// Runs one statement to completion.
  func execute(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError)
  /// Runs several `;`-separated statements without arguments (migrations).
  func executeScript(_ sql: String) throws(DatabaseError)
  /// All rows of a query.
  func rows(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) -> [Row]
  /// The first row of a query, if any.
  func row(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) -> Row?
  /// Visits rows one at a time, for scans too large to hold.
  func forEachRow(_ sql: String, _ arguments: [any SQLBindable], _ body: (Row) throws -> Void) throws
  /// Rows changed by the last INSERT, UPDATE or DELETE.
  var changes: Int { get }
  /// Runs `body` in a transaction that commits if it returns and rolls back if it throws.
  ///
  /// `immediate` takes the catalog's write lock at once and alone (`BEGIN IMMEDIATE` on SQLite,
  /// the store's transaction-level advisory lock, exclusively, on PostgreSQL): every decision
  /// made inside is then made with no other writer, in this process or another, on this node or
  /// another (keyed writes hold that lock shared: ``KeyedWriteDatabase``).
  func transaction<T>(immediate: Bool, _ body: (Database) throws -> T) throws -> T
  /// Runs `body` (whole transactions) with commits that are atomic and ordered but need not
  /// reach the disk before they return: a crash of the process loses none of them, a crash of
  /// the machine (or, on PostgreSQL, of the server) may lose the last few. For bookkeeping that
  /// is redone when lost (an event delivery's lease or acknowledgement: sent again, at least
  /// once), never for what a client was told is stored. A later durable commit makes every
  /// earlier one durable too (both engines' logs are sequential).
  func committingLazily<T>(_ body: () throws -> T) throws -> T
}

extension Database {
  package func committingLazily<T>(_ body: () throws -> T) throws -> T { try body() }
  package func execute(_ sql: String) throws(DatabaseError) { try execute(sql, []) }
  package func rows(_ sql: String) throws(DatabaseError) -> [Row] { try rows(sql, []) }
  package func row(_ sql: String) throws(DatabaseError) -> Row? { try row(sql, []) }
  package func forEachRow(_ sql: String, _ body: (Row) throws -> Void) throws { try forEachRow(sql, [], body) }
}
