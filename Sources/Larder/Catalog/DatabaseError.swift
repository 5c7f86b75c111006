/// A catalog failure (SQLite or PostgreSQL), with the statement that caused it.
///
/// Every SQLite result code and every PostgreSQL result in Larder passes through one check per
/// wrapper and becomes one of these, so callers test `isBusy`, `isDiskFull`, `isConstraint` the
/// same way whichever catalog answered.
public struct DatabaseError: Error, CustomStringConvertible, Sendable {
  /// SQLite's extended result code (`SQLITE_CONSTRAINT_FOREIGNKEY`, …); 0 for PostgreSQL.
  public let extendedCode: Int32
  public let message: String
  public let sql: String?
  /// PostgreSQL's five-character SQLSTATE (`23503`, `40P01`, …); nil for SQLite. A lost
  /// connection is `08006` (class 08, connection exception).
  public let sqlState: String?

  public init(extendedCode: Int32, message: String, sql: String?, sqlState: String? = nil) {
    self.extendedCode = extendedCode
    self.message = message
    self.sql = sql
    self.sqlState = sqlState
  }

  /// The primary result code (`SQLITE_BUSY`, `SQLITE_FULL`, …); 0 for PostgreSQL.
  public var code: Int32 { extendedCode & 0xff }

  // SQLite's primary codes, spelled here so this type needs no C module.
  private static let (sqliteBusy, sqliteLocked, sqliteFull, sqliteConstraint): (Int32, Int32, Int32, Int32) = (5, 6, 13, 19)

  /// Another writer holds the lock (SQLite), or a serialization failure, deadlock or lock
  /// timeout (PostgreSQL class 40, `55P03`).
  public var isBusy: Bool {
    code == Self.sqliteBusy || code == Self.sqliteLocked
      || sqlState.map { $0.hasPrefix("40") || $0 == "55P03" } == true
  }
  /// `SQLITE_FULL`, or PostgreSQL's `53100` (disk full).
  public var isDiskFull: Bool { code == Self.sqliteFull || sqlState == "53100" }
  /// Any integrity constraint (class 23 on PostgreSQL).
  public var isConstraint: Bool { code == Self.sqliteConstraint || sqlState?.hasPrefix("23") == true }
  public var isForeignKeyViolation: Bool {
    extendedCode == (Self.sqliteConstraint | (3 << 8)) || sqlState == "23503"
  }
  /// The connection to the server was lost or could not be made (PostgreSQL class 08); the
  /// statement's outcome is unknown unless it was a read.
  public var isConnectionLost: Bool { sqlState?.hasPrefix("08") == true }

  public var description: String {
    var text =
      sqlState.map { "PostgreSQL error \($0): \(message)" } ?? "SQLite error \(extendedCode): \(message)"
    if let sql { text += " — while executing `\(sql)`" }
    return text
  }
}
