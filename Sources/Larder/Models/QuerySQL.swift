import Foundation

/// Turns queries and indexes into SQL over the `records` table.
///
/// Field paths and the type name go into the SQL text as literals (after validation and
/// quoting) because SQLite and PostgreSQL match an expression index or a partial index only
/// against the same literal expression; every compared value is a bound parameter.
///
/// On SQLite a field is `json_extract(body, '$.a.b')` over a TEXT body; on PostgreSQL it is
/// `(body #> '{a,b}')` over a `jsonb` body, compared with jsonb values, so a declared index is
/// the same expression index on both.
enum QuerySQL {
  struct Compiled {
    let sql: String
    let arguments: [any SQLBindable]
  }

  /// `'$.a.b[0]'` for `a.b[0]`, after checking the path has only names and indices.
  static func jsonPath(_ field: String) throws(ModelError) -> String {
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

  static func extract(_ field: String, _ dialect: SQLDialect = .sqlite) throws(ModelError) -> String {
    switch dialect {
    case .sqlite: "json_extract(body, \(try jsonPath(field)))"
    case .postgres: "(body #> \(try pgPath(field)))"
    }
  }

  /// `'{a,b,0}'` for `a.b[0]` (PostgreSQL's path array), after the same validation.
  static func pgPath(_ field: String) throws(ModelError) -> String {
    _ = try jsonPath(field)
    let parts = field.replacingOccurrences(of: "[", with: ".").replacingOccurrences(of: "]", with: "")
      .split(separator: ".")
    return "'{" + parts.joined(separator: ",") + "}'"
  }

  /// The field as text (`#>>`), for PostgreSQL's string tests.
  static func pgText(_ field: String) throws(ModelError) -> String { "(body #>> \(try pgPath(field)))" }

  /// The type name as an SQL string literal.
  static func typeLiteral(_ type: String) throws(ModelError) -> String {
    guard !type.isEmpty, !type.utf8.contains(0) else { throw .invalidModelType(type) }
    return "'" + type.replacingOccurrences(of: "'", with: "''") + "'"
  }

  /// `SELECT <columns> FROM records WHERE type = '<type>' AND … ORDER BY … LIMIT ? OFFSET ?`.
  static func select<T>(
    _ columns: String, _ query: Query<T>, window: Bool = true, dialect: SQLDialect = .sqlite
  ) throws -> Compiled {
    var arguments: [any SQLBindable] = []
    var sql = "SELECT \(columns) FROM records"
    // PostgreSQL's planner has statistics and no INDEXED BY: it chooses itself.
    if dialect == .sqlite, let index = try chooseIndex(for: query, window: window) {
      sql += " INDEXED BY \"\(indexName(type: T.modelType, fields: index.fields))\""
    }
    sql += " WHERE type = \(try typeLiteral(T.modelType))"
    for predicate in query.predicates {
      sql += " AND (" + (try condition(predicate, &arguments, dialect)) + ")"
    }
    guard window else { return Compiled(sql: sql, arguments: arguments) }
    var order: [String] = []
    for key in query.sortKeys {
      order.append(try extract(key.field, dialect) + (key.order == .ascending ? " ASC" : " DESC"))
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
    // No limit: -1 on SQLite, NULL on PostgreSQL (which refuses a negative LIMIT).
    arguments.append(query.fetchLimit.map { SQLValue.integer(Int64($0)) } ?? (dialect == .sqlite ? .integer(-1) : .null))
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

  static func condition(
    _ predicate: ModelPredicate, _ arguments: inout [any SQLBindable], _ dialect: SQLDialect = .sqlite
  ) throws -> String {
    if dialect == .postgres { return try pgCondition(predicate, &arguments) }
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
        "json_type(body, \(try jsonPath(field))) = 'text' AND \(e) >= ? AND substr(\(e), 1, length(?)) = ?"
    case .contains(let field, let text):
      arguments.append(text)
      return "json_type(body, \(try jsonPath(field))) = 'text' AND instr(\(try extract(field)), ?) > 0"
    case .isNil(let field):
      return "\(try extract(field)) IS NULL"
    case .isNotNil(let field):
      return "\(try extract(field)) IS NOT NULL"
    case .and(let a, let b):
      return "(\(try condition(a, &arguments))) AND (\(try condition(b, &arguments)))"
    case .or(let a, let b):
      return "(\(try condition(a, &arguments))) OR (\(try condition(b, &arguments)))"
    case .not(let a):
      return "NOT (\(try condition(a, &arguments)))"
    }
  }

  /// ``condition(_:_:_:)`` in PostgreSQL's jsonb terms: values are bound as JSON text and
  /// compared as jsonb (`true` is a boolean there, not 1); JSON null and a missing key are both nil.
  static func pgCondition(_ predicate: ModelPredicate, _ arguments: inout [any SQLBindable]) throws -> String {
    switch predicate {
    case .compare(let field, let op, let value):
      arguments.append(String(decoding: try JSONEncoder().encode(value), as: UTF8.self))
      // SQLite's null-safe `IS NOT` is PostgreSQL's `IS DISTINCT FROM`.
      let sqlOp = op == .notEqual ? "IS DISTINCT FROM" : op.rawValue
      return "\(try extract(field, .postgres)) \(sqlOp) ?::jsonb"
    case .isIn(let field, let values):
      arguments.append(String(decoding: try JSONEncoder().encode(values), as: UTF8.self))
      return "\(try extract(field, .postgres)) IN (SELECT value FROM jsonb_array_elements(?::jsonb))"
    case .hasPrefix(let field, let prefix):
      // The range test lets an index narrow the scan; starts_with makes it exact.
      let e = try extract(field, .postgres)
      arguments.append(contentsOf: [prefix, prefix] as [any SQLBindable])
      return "jsonb_typeof(\(e)) = 'string' AND \(e) >= to_jsonb(?::text) AND starts_with(\(try pgText(field)), ?::text)"
    case .contains(let field, let text):
      arguments.append(text)
      return "jsonb_typeof(\(try extract(field, .postgres))) = 'string' AND strpos(\(try pgText(field)), ?::text) > 0"
    case .isNil(let field):
      return "coalesce(jsonb_typeof(\(try extract(field, .postgres))), 'null') = 'null'"
    case .isNotNil(let field):
      return "jsonb_typeof(\(try extract(field, .postgres))) <> 'null'"
    case .and(let a, let b):
      return "(\(try pgCondition(a, &arguments))) AND (\(try pgCondition(b, &arguments)))"
    case .or(let a, let b):
      return "(\(try pgCondition(a, &arguments))) OR (\(try pgCondition(b, &arguments)))"
    case .not(let a):
      return "NOT (\(try pgCondition(a, &arguments)))"
    }
  }

  /// `CREATE INDEX IF NOT EXISTS` for a declared index of `type`: partial, over this type's rows only.
  static func createIndex(type: String, index: ModelIndex, dialect: SQLDialect = .sqlite) throws -> String {
    guard !index.fields.isEmpty else { throw ModelError.invalidQuery("an index needs at least one field") }
    let expressions = try index.fields.map { try extract($0, dialect) }
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
