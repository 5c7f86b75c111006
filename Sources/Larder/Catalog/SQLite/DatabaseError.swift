internal import CSQLite

/// An SQLite failure, with the statement that caused it.
///
/// Every SQLite result code in Larder passes through ``check(_:_:sql:)`` and becomes one of these.
public struct DatabaseError: Error, CustomStringConvertible, Sendable {
  /// The extended result code (`SQLITE_CONSTRAINT_FOREIGNKEY`, …).
  public let extendedCode: Int32
  public let message: String
  public let sql: String?

  /// The primary result code (`SQLITE_BUSY`, `SQLITE_FULL`, …).
  public var code: Int32 { extendedCode & 0xff }

  public var isBusy: Bool { code == SQLITE_BUSY || code == SQLITE_LOCKED }
  public var isDiskFull: Bool { code == SQLITE_FULL }
  public var isConstraint: Bool { code == SQLITE_CONSTRAINT }
  public var isForeignKeyViolation: Bool { extendedCode == (SQLITE_CONSTRAINT | (3 << 8)) }

  public var description: String {
    var text = "SQLite error \(extendedCode): \(message)"
    if let sql { text += " — while executing `\(sql)`" }
    return text
  }
}

/// Throws a ``DatabaseError`` unless `result` is one of the success codes.
@inline(__always)
func check(_ result: Int32, _ connection: OpaquePointer?, sql: String? = nil) throws(DatabaseError) {
  switch result {
  case SQLITE_OK, SQLITE_ROW, SQLITE_DONE: return
  default:
    let message = connection.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(result))
    let extended = connection.map { sqlite3_extended_errcode($0) } ?? result
    throw DatabaseError(extendedCode: extended, message: message, sql: sql)
  }
}
