import Foundation

/// Turns queries and indexes into SQL over the `records` table.
///
/// Field paths and the type name go into the SQL text as literals (after validation and
/// quoting) because SQLite matches an expression index or a partial index only against the
/// same literal expression; every compared value is a bound parameter.
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

  static func extract(_ field: String) throws(ModelError) -> String {
    "json_extract(body, \(try jsonPath(field)))"
  }

  /// The type name as an SQL string literal.
  static func typeLiteral(_ type: String) throws(ModelError) -> String {
    guard !type.isEmpty, !type.utf8.contains(0) else { throw .invalidModelType(type) }
    return "'" + type.replacingOccurrences(of: "'", with: "''") + "'"
  }

  /// `SELECT <columns> FROM records WHERE type = '<type>' AND … ORDER BY … LIMIT ? OFFSET ?`.
  static func select<T>(_ columns: String, _ query: Query<T>, window: Bool = true) throws -> Compiled {
    var arguments: [any SQLBindable] = []
    var sql = "SELECT \(columns) FROM records"
    if let index = try chooseIndex(for: query, window: window) {
      sql += " INDEXED BY \"\(indexName(type: T.modelType, fields: index.fields))\""
    }
    sql += " WHERE type = \(try typeLiteral(T.modelType))"
    for predicate in query.predicates {
      sql += " AND (" + (try condition(predicate, &arguments)) + ")"
    }
    guard window else { return Compiled(sql: sql, arguments: arguments) }
    var order: [String] = []
    for key in query.sortKeys {
      order.append(try extract(key.field) + (key.order == .ascending ? " ASC" : " DESC"))
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
    arguments.append(query.fetchLimit ?? -1)
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

  static func condition(_ predicate: ModelPredicate, _ arguments: inout [any SQLBindable]) throws -> String {
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

  /// `CREATE INDEX IF NOT EXISTS` for a declared index of `type`: partial, over this type's rows only.
  static func createIndex(type: String, index: ModelIndex) throws -> String {
    guard !index.fields.isEmpty else { throw ModelError.invalidQuery("an index needs at least one field") }
    let expressions = try index.fields.map { try extract($0) }
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
