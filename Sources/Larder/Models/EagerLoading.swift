import Foundation

/// Queries that bring the models a reference field points at along with their results, in two
/// statements whatever the number of rows (not one per row).
///
/// ```swift
/// let page = try larder.models.query(Query(Post.self).sorted(by: "title").limit(50),
///                                    including: "authorID", User.self)
/// for (post, author) in page { print(post.title, author?.name ?? "—") }
/// ```
extension ModelStore {
  /// The models matching `query`, each with the `R` whose id its field `field` holds: nil when
  /// the field is null or missing or no such `R` exists. One snapshot, two statements.
  /// - Throws: ``ModelError/invalidFieldPath(_:)``, ``ModelError/invalidReference(type:id:field:)``
  ///   when the field holds something other than an id string, ``ModelError/decodingFailed(type:id:message:)``.
  public func query<T: Model, R: Model>(
    _ query: Query<T>, including field: String, _ type: R.Type
  ) throws -> [(model: T, included: R?)] {
    try ensureIndexes(T.self)
    let compiled = try QuerySQL.select("id, body", query, dialect: catalog.dialect)
    return try catalog.read { db in try Self.including(compiled, field: field, R.self, in: db) }
  }

  /// The two statements of an eager query: the rows, then every referenced `R` at once.
  static func including<T: Model, R: Model>(
    _ compiled: QuerySQL.Compiled, field: String, _ type: R.Type, in db: Database
  ) throws -> [(model: T, included: R?)] {
    let rows = try Self.rows(compiled, in: db)
    var targets: [String?] = []
    for row in rows {
      let json = try JSONSerialization.jsonObject(with: Data(row.body.utf8), options: [.fragmentsAllowed])
      switch try ModelReference.value(at: field, in: json) {
      case nil: targets.append(nil)
      case let id as String: targets.append(id)
      default: throw ModelError.invalidReference(type: T.modelType, id: row.id, field: field)
      }
    }
    let wanted = Set(targets.compactMap { $0 }).sorted()
    var found: [String: R] = [:]
    if !wanted.isEmpty {
      let list = String(decoding: try JSONEncoder().encode(wanted), as: UTF8.self)
      let sql = "SELECT id, body FROM records WHERE type = ? AND id IN (\(db.dialect.jsonArrayStrings))"
      for row in try db.rows(sql, [R.modelType, list]) {
        let id = row.string("id") ?? ""
        found[id] = try decode(R.self, id: id, body: row.string("body") ?? "")
      }
    }
    return try zip(rows, targets).map { row, target in
      (try decode(T.self, id: row.id, body: row.body), target.flatMap { found[$0] })
    }
  }
}

extension ModelTransaction {
  /// ``ModelStore/query(_:including:_:)`` as this transaction sees it.
  public func query<T: Model, R: Model>(
    _ query: Query<T>, including field: String, _ type: R.Type
  ) throws -> [(model: T, included: R?)] {
    try checkOpen()
    try prepare(T.self)
    let compiled = try QuerySQL.select("id, body", query, dialect: db.dialect)
    return try ModelStore.including(compiled, field: field, R.self, in: db)
  }
}
