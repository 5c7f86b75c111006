import Foundation

/// Where one catalog's SQL differs from another's, in one small type per catalog:
/// ``SQLiteDialect`` here, `PostgresDialect` in `LarderPostgres`. The store's SQL is otherwise
/// written once with `?` placeholders; call sites ask the dialect, never which catalog it is.
package protocol SQLDialect: Sendable {
  /// A field of a record's JSON body (`a.b[0]`, validated) as an SQL expression; a declared
  /// index is built on exactly this expression, so queries match it.
  func extract(_ field: String) throws(ModelError) -> String
  /// A test of one field (every predicate but `and`, `or` and `not`, which ``condition(_:_:)``
  /// composes) as SQL, its values appended to `arguments`.
  func test(_ predicate: ModelPredicate, _ arguments: inout [any SQLBindable]) throws -> String
  /// Whether a query names the index to search (SQLite's `INDEXED BY`: without statistics its
  /// planner would scan a whole type); PostgreSQL's planner chooses itself.
  var namesIndexes: Bool { get }
  /// The `LIMIT` argument that means no limit.
  var noLimit: SQLValue { get }
  /// A subquery listing the strings of a JSON array argument (`?`), one row each.
  var jsonArrayStrings: String { get }
  /// The catalog's clock in integer milliseconds since 1970 (how dates are stored) as an SQL
  /// expression. Leases are claimed, renewed and judged on it, never on a node's clock: a node
  /// whose clock runs ahead would otherwise see a live lease as run out and take it.
  var nowMilliseconds: String { get }
  /// An integer SQL expression that orders write transactions by commit where several commit
  /// at once (PostgreSQL's transaction id), and a query (column `settled`) below which every
  /// such value belongs to a finished transaction; the event feed answers only settled events,
  /// so a cursor never passes one that commits later. SQLite has one writer: `0` and nil.
  var transactionOrder: String { get }
  var settledTransactionOrder: String? { get }
  /// A query that hands out a new blob fence as column `fence` (`BlobFences`, LarderS3Store), and whether it
  /// writes (it then runs in a write transaction of its own; else with none open).
  var nextFence: (sql: String, writes: Bool) { get }
  /// A query for the first fence not handed out yet, as column `next`.
  var firstUnissuedFence: String { get }
  /// A query that moves the fence counter to its one argument, after a catalog copy, when the
  /// counter is not a row that the copy carries; nil when it is.
  var fenceCounterCatchUp: String? { get }
  /// A record's body with one field (validated) set to JSON null, as an SQL expression: how a
  /// ``DeleteRule/nullify`` reference lets go of a deleted model.
  func bodySettingNull(_ field: String) throws(ModelError) -> String
  /// The steps the catalog plans for `sql`, one line each.
  func queryPlan(_ sql: String, _ arguments: [any SQLBindable], on db: any Database) throws -> [String]
}

extension SQLDialect {
  /// A predicate over records as SQL, its values appended to `arguments`.
  package func condition(_ predicate: ModelPredicate, _ arguments: inout [any SQLBindable]) throws -> String {
    switch predicate {
    case .and(let a, let b):
      "(\(try condition(a, &arguments))) AND (\(try condition(b, &arguments)))"
    case .or(let a, let b):
      "(\(try condition(a, &arguments))) OR (\(try condition(b, &arguments)))"
    case .not(let a):
      "NOT (\(try condition(a, &arguments)))"
    case .linked(let relation, let type, let id, let outgoing):
      ModelRelations.condition(relation: relation, type: type, id: id, outgoing: outgoing, &arguments)
    default:
      try test(predicate, &arguments)
    }
  }
}

/// SQLite's SQL: JSON1 functions over TEXT bodies.
package struct SQLiteDialect: SQLDialect {
  package init() {}

  package func extract(_ field: String) throws(ModelError) -> String {
    "json_extract(body, \(try QuerySQL.jsonPath(field)))"
  }

  package func bodySettingNull(_ field: String) throws(ModelError) -> String {
    "json_set(body, \(try QuerySQL.jsonPath(field)), json('null'))"
  }

  package var namesIndexes: Bool { true }
  package var noLimit: SQLValue { .integer(-1) }
  package var jsonArrayStrings: String { "SELECT value FROM json_each(?)" }
  /// A counter row, bumped in a tiny write transaction of its own.
  package var nextFence: (sql: String, writes: Bool) {
    ("UPDATE blob_fences SET fence = fence + 1 WHERE name = 'counter' RETURNING fence", true)
  }
  package var firstUnissuedFence: String { "SELECT fence + 1 AS next FROM blob_fences WHERE name = 'counter'" }
  package var fenceCounterCatchUp: String? { nil }
  /// One machine: its clock is the catalog's, read by SQLite itself.
  package var nowMilliseconds: String { "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)" }
  package var transactionOrder: String { "0" }
  package var settledTransactionOrder: String? { nil }

  package func queryPlan(_ sql: String, _ arguments: [any SQLBindable], on db: any Database) throws -> [String] {
    try db.rows("EXPLAIN QUERY PLAN " + sql, arguments).compactMap { $0.string("detail") }
  }

  package func test(_ predicate: ModelPredicate, _ arguments: inout [any SQLBindable]) throws -> String {
    switch predicate {
    case .compare(let field, let op, let value):
      arguments.append(value.sqlValue)
      return "\(try extract(field)) \(op.rawValue) ?"
    case .isIn(let field, let values):
      let json = try JSONEncoder().encode(values)
      arguments.append(String(decoding: json, as: UTF8.self))
      return "\(try extract(field)) IN (SELECT value FROM json_each(?))"
    case .hasPrefix(let field, let prefix):
      // The range test lets an index narrow the scan; the substr test makes it exact.
      let e = try extract(field)
      arguments.append(contentsOf: [prefix, prefix, prefix] as [any SQLBindable])
      return
        "json_type(body, \(try QuerySQL.jsonPath(field))) = 'text' AND \(e) >= ? AND substr(\(e), 1, length(?)) = ?"
    case .contains(let field, let text):
      arguments.append(text)
      return "json_type(body, \(try QuerySQL.jsonPath(field))) = 'text' AND instr(\(try extract(field)), ?) > 0"
    case .isNil(let field):
      return "\(try extract(field)) IS NULL"
    case .isNotNil(let field):
      return "\(try extract(field)) IS NOT NULL"
    case .and, .or, .not, .linked:
      return try condition(predicate, &arguments)
    }
  }
}
