import Foundation
import Larder

/// PostgreSQL's SQL: `jsonb` bodies, values bound as JSON text and compared as jsonb (`true` is
/// a boolean there, not 1); JSON null and a missing key are both nil.
struct PostgresDialect: SQLDialect {
  func extract(_ field: String) throws(ModelError) -> String { "(body #> \(try Self.path(field)))" }

  /// `'{a,b,0}'` for `a.b[0]` (PostgreSQL's path array), after the same validation as SQLite's.
  static func path(_ field: String) throws(ModelError) -> String {
    _ = try QuerySQL.jsonPath(field)
    let parts = field.replacingOccurrences(of: "[", with: ".").replacingOccurrences(of: "]", with: "")
      .split(separator: ".")
    return "'{" + parts.joined(separator: ",") + "}'"
  }

  /// The field as text (`#>>`), for string tests.
  static func text(_ field: String) throws(ModelError) -> String { "(body #>> \(try path(field)))" }

  func bodySettingNull(_ field: String) throws(ModelError) -> String {
    "jsonb_set(body, \(try Self.path(field)), 'null'::jsonb)"
  }

  var namesIndexes: Bool { false }
  /// PostgreSQL refuses a negative LIMIT; NULL is none.
  var noLimit: SQLValue { .null }
  var jsonArrayStrings: String { "SELECT jsonb_array_elements_text(?::jsonb)" }
  /// A SEQUENCE: `nextval` takes no lock and is never rolled back, so no transaction is needed.
  var nextFence: (sql: String, writes: Bool) { ("SELECT nextval('blob_fence_counter') AS fence", false) }
  /// A sequence that was never called has `last_value` = its start, not yet handed out.
  var firstUnissuedFence: String {
    "SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END AS next FROM blob_fence_counter"
  }
  /// The copy carries the `blob_fences` rows, not the sequence: it must start past every fence used.
  var fenceCounterCatchUp: String? { "SELECT setval('blob_fence_counter', ?) AS f" }
  /// The server's time at the statement (`clock_timestamp()`, not `now()`: the transaction's
  /// start, which the lock wait can leave behind).
  var nowMilliseconds: String { "(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)" }
  var transactionOrder: String { "(pg_current_xact_id()::text::bigint)" }
  var settledTransactionOrder: String? {
    "SELECT (pg_snapshot_xmin(pg_current_snapshot())::text::bigint) AS settled"
  }

  func queryPlan(_ sql: String, _ arguments: [any SQLBindable], on db: any Database) throws -> [String] {
    try db.rows("EXPLAIN " + sql, arguments).compactMap { $0.string("QUERY PLAN")?.trimmingCharacters(in: .whitespaces) }
  }

  func test(_ predicate: ModelPredicate, _ arguments: inout [any SQLBindable]) throws -> String {
    switch predicate {
    case .compare(let field, let op, let value):
      arguments.append(String(decoding: try JSONEncoder().encode(value), as: UTF8.self))
      // SQLite's null-safe `IS NOT` is PostgreSQL's `IS DISTINCT FROM`.
      let sqlOp = op == .notEqual ? "IS DISTINCT FROM" : op.rawValue
      return "\(try extract(field)) \(sqlOp) ?::jsonb"
    case .isIn(let field, let values):
      arguments.append(String(decoding: try JSONEncoder().encode(values), as: UTF8.self))
      return "\(try extract(field)) IN (SELECT value FROM jsonb_array_elements(?::jsonb))"
    case .hasPrefix(let field, let prefix):
      // The range test lets an index narrow the scan; starts_with makes it exact.
      let e = try extract(field)
      arguments.append(contentsOf: [prefix, prefix] as [any SQLBindable])
      return "jsonb_typeof(\(e)) = 'string' AND \(e) >= to_jsonb(?::text) AND starts_with(\(try Self.text(field)), ?::text)"
    case .contains(let field, let text):
      arguments.append(text)
      return "jsonb_typeof(\(try extract(field))) = 'string' AND strpos(\(try Self.text(field)), ?::text) > 0"
    case .isNil(let field):
      return "coalesce(jsonb_typeof(\(try extract(field))), 'null') = 'null'"
    case .isNotNil(let field):
      return "jsonb_typeof(\(try extract(field))) <> 'null'"
    case .and, .or, .not, .linked:
      return try condition(predicate, &arguments)
    }
  }
}
