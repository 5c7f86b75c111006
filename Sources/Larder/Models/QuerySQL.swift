import Foundation

/// Turns queries and indexes into SQL over the `records` table.
///
/// Field paths and the type name go into the SQL text as literals (after validation and
/// quoting) because SQLite and PostgreSQL match an expression index or a partial index only
/// against the same literal expression; every compared value is a bound parameter.
///
/// Where the catalogs differ (how a field is extracted and compared) is the ``SQLDialect``'s:
/// on SQLite a field is `json_extract(body, '$.a.b')` over a TEXT body; on PostgreSQL it is
/// `(body #> '{a,b}')` over a `jsonb` body, compared with jsonb values, so a declared index is
/// the same expression index on both.
package enum QuerySQL {
  struct Compiled {
    let sql: String
    let arguments: [any SQLBindable]
  }

  /// `'$.a.b[0]'` for `a.b[0]`, after checking the path has only names and indices.
  package static func jsonPath(_ field: String) throws(ModelError) -> String {
    let bytes = Array(field.utf8)
    guard !bytes.isEmpty, bytes.count <= 512 else { throw .invalidFieldPath(field) }
    func isNameStart(_ c: UInt8) -> Bool { (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F }
    func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    var i = 0
    var expectName = true
    while i < bytes.count {
      if expectName {
        // A name: letters, digits, underscore (digits allowed first: `_0` and `0` keys exist).
        let start = i
        while i < bytes.count, isNameStart(bytes[i]) || isDigit(bytes[i]) { i += 1 }
        guard i > start else { throw .invalidFieldPath(field) }
        expectName = false
      } else if bytes[i] == 0x2E {  // .
        i += 1
        expectName = true
      } else if bytes[i] == 0x5B {  // [
        i += 1
        let start = i
        while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        guard i > start, i - start <= 9, i < bytes.count, bytes[i] == 0x5D else { throw .invalidFieldPath(field) }
        i += 1
      } else {
        throw .invalidFieldPath(field)
      }
    }
    guard !expectName else { throw .invalidFieldPath(field) }
    return "'$.\(field)'"
  }

  /// The type name as an SQL string literal.
  package static func typeLiteral(_ type: String) throws(ModelError) -> String {
    guard !type.isEmpty, !type.utf8.contains(0) else { throw .invalidModelType(type) }
    return "'" + type.replacingOccurrences(of: "'", with: "''") + "'"
  }

  /// `SELECT <columns> FROM records WHERE type = '<type>' AND … ORDER BY … LIMIT ? OFFSET ?`.
  static func select<T>(
    _ columns: String, _ query: Query<T>, window: Bool = true, dialect: any SQLDialect
  ) throws -> Compiled {
    var arguments: [any SQLBindable] = []
    var sql = "SELECT \(columns) FROM records"
    // PostgreSQL's planner has statistics and no INDEXED BY: it chooses itself.
    if dialect.namesIndexes, let index = try chooseIndex(for: query, window: window) {
      sql += " INDEXED BY \"\(indexName(type: T.modelType, fields: index.fields))\""
    }
    sql += " WHERE type = \(try typeLiteral(T.modelType))"
    for predicate in query.predicates {
      sql += " AND (" + (try dialect.condition(predicate, &arguments)) + ")"
    }
    guard window else { return Compiled(sql: sql, arguments: arguments) }
    var order: [String] = []
    for key in query.sortKeys {
      order.append(try dialect.extract(key.field) + (key.order == .ascending ? " ASC" : " DESC"))
    }
    order.append("id ASC")
    sql += " ORDER BY " + order.joined(separator: ", ")
    if let limit = query.fetchLimit {
      guard limit >= 0 else { throw ModelError.invalidQuery("limit must not be negative, got \(limit)") }
    }
    guard query.fetchOffset >= 0 else {
      throw ModelError.invalidQuery("offset must not be negative, got \(query.fetchOffset)")
    }
    sql += " LIMIT ? OFFSET ?"
    arguments.append(query.fetchLimit.map { SQLValue.integer(Int64($0)) } ?? dialect.noLimit)
    arguments.append(query.fetchOffset)
    return Compiled(sql: sql, arguments: arguments)
  }

  /// The declared index to search, if one fits.
  ///
  /// Without statistics SQLite's planner prefers the primary key's `type = ?` prefix to a
  /// range or `IN` on an expression index, and so scans the whole type; it is told instead.
  /// An index fits when its first field is tested with `=`, `IN` or `IS NULL` (preferred), or
  /// with a range or prefix, in a top-level AND term — forms the index always serves — or,
  /// for a limited query, when it is the first sort key.
  static func chooseIndex<T>(for query: Query<T>, window: Bool) throws -> ModelIndex? {
    var equal: Set<String> = []
    var ranged: Set<String> = []
    func collect(_ predicate: ModelPredicate) {
      switch predicate {
      case .compare(let field, .equal, _), .isIn(let field, _), .isNil(let field): equal.insert(field)
      case .compare(let field, .notEqual, _): _ = field
      case .compare(let field, _, _), .hasPrefix(let field, _): ranged.insert(field)
      case .and(let a, let b):
        collect(a)
        collect(b)
      default: break
      }
    }
    query.predicates.forEach(collect)
    let indexes = T.indexes.filter { !$0.fields.isEmpty }
    if let index = indexes.first(where: { equal.contains($0.fields[0]) }) { return index }
    if let index = indexes.first(where: { ranged.contains($0.fields[0]) }) { return index }
    if window, query.fetchLimit != nil, let first = query.sortKeys.first,
      let index = indexes.first(where: { $0.fields[0] == first.field })
    {
      return index
    }
    return nil
  }

  /// `CREATE INDEX IF NOT EXISTS` for a declared index of `type`: partial, over this type's rows only.
  static func createIndex(type: String, index: ModelIndex, dialect: any SQLDialect) throws -> String {
    guard !index.fields.isEmpty else { throw ModelError.invalidQuery("an index needs at least one field") }
    let expressions = try index.fields.map { try dialect.extract($0) }
    return
      "CREATE INDEX IF NOT EXISTS \"\(indexName(type: type, fields: index.fields))\" ON records("
      + expressions.joined(separator: ", ") + ") WHERE type = \(try typeLiteral(type))"
  }

  /// A readable, collision-free name: sanitised type and fields plus a hash of the exact ones.
  static func indexName(type: String, fields: [String]) -> String {
    func clean(_ s: String) -> String {
      String(s.unicodeScalars.prefix(40).map { $0.properties.isAlphabetic || ("0"..."9").contains($0) ? Character($0) : "_" })
    }
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
    for byte in ([type] + fields).joined(separator: "\u{0}").utf8 {
      hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
    }
    let hex = String(hash, radix: 16)
    return "model_\(clean(type))_\(fields.map(clean).joined(separator: "_"))_\(hex)"
  }
}
