internal import CSQLite

/// A prepared SQLite statement, owned by the connection that made it.
///
/// Not `Sendable`: a statement lives and dies on the thread of its connection.
package final class Statement {
  let handle: OpaquePointer
  let sql: String
  private unowned let database: SQLiteDatabase

  init(database: SQLiteDatabase, sql: String) throws(DatabaseError) {
    self.database = database
    self.sql = sql
    var stmt: OpaquePointer?
    try check(sqlite3_prepare_v2(database.handle, sql, -1, &stmt, nil), database.handle, sql: sql)
    guard let stmt else {
      throw DatabaseError(extendedCode: SQLITE_MISUSE, message: "empty statement", sql: sql)
    }
    handle = stmt
  }

  deinit { sqlite3_finalize(handle) }

  /// Binds positional parameters (`?`), replacing earlier bindings.
  package func bind(_ values: [any SQLBindable]) throws(DatabaseError) {
    sqlite3_reset(handle)
    sqlite3_clear_bindings(handle)
    let expected = Int(sqlite3_bind_parameter_count(handle))
    guard expected == values.count else {
      throw DatabaseError(
        extendedCode: SQLITE_RANGE, message: "expected \(expected) arguments, got \(values.count)", sql: sql)
    }
    for (offset, value) in values.enumerated() {
      let index = Int32(offset + 1)
      let result: Int32
      switch value.sqlValue {
      case .null: result = sqlite3_bind_null(handle, index)
      case .integer(let v): result = sqlite3_bind_int64(handle, index, v)
      case .real(let v): result = sqlite3_bind_double(handle, index, v)
      case .text(let v):
        // By byte count, not as a C string: a NUL inside the text must not cut it short.
        var text = v
        result = text.withUTF8 { utf8 in
          utf8.withMemoryRebound(to: CChar.self) { chars in
            // A nil pointer would bind NULL, so the empty string gets a real (empty) one.
            guard let base = chars.baseAddress else { return sqlite3_bind_text(handle, index, "", 0, SQLITE_TRANSIENT) }
            return sqlite3_bind_text(handle, index, base, Int32(chars.count), SQLITE_TRANSIENT)
          }
        }
      case .blob(let v):
        result = v.withUnsafeBytes {
          sqlite3_bind_blob(handle, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count), SQLITE_TRANSIENT)
        }
      }
      try check(result, database.handle, sql: sql)
    }
  }

  /// Steps once; true while a row is available.
  package func step() throws(DatabaseError) -> Bool {
    let result = sqlite3_step(handle)
    try check(result, database.handle, sql: sql)
    return result == SQLITE_ROW
  }

  /// Column names are fixed once a statement is prepared: read them once.
  private lazy var layout: RowLayout = RowLayout(
    columns: (0..<sqlite3_column_count(handle)).map { String(cString: sqlite3_column_name(handle, $0)) })

  /// The current row's values.
  package func row() -> Row {
    let count = Int(sqlite3_column_count(handle))
    var values = [SQLValue]()
    values.reserveCapacity(count)
    for i in 0..<Int32(count) {
      switch sqlite3_column_type(handle, i) {
      case SQLITE_INTEGER: values.append(.integer(sqlite3_column_int64(handle, i)))
      case SQLITE_FLOAT: values.append(.real(sqlite3_column_double(handle, i)))
      case SQLITE_TEXT:
        // Text may contain NUL: read exactly sqlite3_column_bytes bytes (after column_text, as SQLite requires).
        let text = sqlite3_column_text(handle, i)
        let n = Int(sqlite3_column_bytes(handle, i))
        values.append(.text(text.map { String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self) } ?? ""))
      case SQLITE_BLOB:
        let n = Int(sqlite3_column_bytes(handle, i))
        if n == 0 {
          values.append(.blob([]))
        } else {
          let p = sqlite3_column_blob(handle, i)!
          values.append(.blob(Array(UnsafeRawBufferPointer(start: p, count: n))))
        }
      default: values.append(.null)
      }
    }
    return Row(layout: layout, values: values)
  }

  package func reset() { sqlite3_reset(handle) }
}

@available(*, unavailable)
extension Statement: Sendable {}

// SQLITE_TRANSIENT is a macro that does not import.
private let SQLITE_TRANSIENT = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

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
