import Foundation

/// A many-to-many relation between two model types, kept as link rows of its own (followers,
/// likes, tags), never loaded whole.
///
/// ```swift
/// let follows = ModelRelation<User, User>("follows")
/// try larder.write { tx in try tx.link(follows, from: "ada", to: "alan") }
/// try larder.models.isLinked(follows, from: "ada", to: "alan")            // true
/// try larder.models.count(follows, from: "ada")                           // how many Ada follows
/// try larder.models.query(follows.targets(of: "ada").sorted(by: "name").limit(20))   // whom, a page
/// try larder.models.query(follows.sources(of: "alan"))                  // Alan's followers
/// ```
/// Both ends must exist when linked; a link goes when either end is deleted. The two queries
/// are ordinary ``Query`` values: filter, sort, page, count and observe them like any other; a
/// link or unlink tells the observers of both types.
public struct ModelRelation<From: Model, To: Model>: Sendable, Hashable {
  /// Names the relation among those between the same two types.
  public let name: String

  public init(_ name: String, from: From.Type = From.self, to: To.Type = To.self) {
    self.name = name
  }

  /// The models `id` links to.
  public func targets(of id: String) -> Query<To> {
    Query(To.self).filter(.linked(relation: name, modelType: From.modelType, modelID: id, outgoing: true))
  }

  /// The models that link to `id`.
  public func sources(of id: String) -> Query<From> {
    Query(From.self).filter(.linked(relation: name, modelType: To.modelType, modelID: id, outgoing: false))
  }
}

/// The SQL of links, shared by transactions, the store and queries.
enum ModelRelations {
  /// A query condition over `records` (``ModelPredicate/linked(relation:modelType:modelID:outgoing:)``).
  static func condition(
    relation: String, type: String, id: String, outgoing: Bool, _ arguments: inout [any SQLBindable]
  ) -> String {
    arguments.append(contentsOf: [relation, type, id] as [any SQLBindable])
    let (known, listed) = outgoing ? ("from", "to") : ("to", "from")
    return """
      EXISTS (SELECT 1 FROM model_links WHERE model_links.relation = ? AND model_links.\(known)_type = ? \
      AND model_links.\(known)_id = ? AND model_links.\(listed)_type = records.type \
      AND model_links.\(listed)_id = records.id)
      """
  }

  static func isLinked<F, T>(_ relation: ModelRelation<F, T>, from: String, to: String, in db: Database)
    throws -> Bool
  {
    try db.row(
      """
      SELECT 1 AS found FROM model_links
      WHERE relation = ? AND from_type = ? AND from_id = ? AND to_type = ? AND to_id = ?
      """, [relation.name, F.modelType, from, T.modelType, to]) != nil
  }

  static func count<F, T>(_ relation: ModelRelation<F, T>, id: String, outgoing: Bool, in db: Database) throws
    -> Int
  {
    let sql =
      outgoing
      ? "SELECT count(*) AS n FROM model_links WHERE relation = ? AND from_type = ? AND from_id = ? AND to_type = ?"
      : "SELECT count(*) AS n FROM model_links WHERE relation = ? AND to_type = ? AND to_id = ? AND from_type = ?"
    let (known, other) = outgoing ? (F.modelType, T.modelType) : (T.modelType, F.modelType)
    return Int(try db.row(sql, [relation.name, known, id, other])?.int("n") ?? 0)
  }
}

extension ModelTransaction {
  /// Links `from` to `to`; false if they were linked already. Both must exist.
  /// - Throws: ``ModelError/linkEndNotFound(relation:type:id:)``; nothing changes.
  @discardableResult
  public func link<F, T>(_ relation: ModelRelation<F, T>, from: String, to: String) throws -> Bool {
    try checkOpen()
    for (type, id) in [(F.modelType, from), (T.modelType, to)] where !(try exists(type: type, id: id)) {
      throw ModelError.linkEndNotFound(relation: relation.name, type: type, id: id)
    }
    try db.execute(
      """
      INSERT INTO model_links(relation, from_type, from_id, to_type, to_id, created_at) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT DO NOTHING
      """, [relation.name, F.modelType, from, T.modelType, to, Date()])
    guard db.changes > 0 else { return false }
    touch(F.modelType, T.modelType)
    return true
  }

  /// Removes the link; false if there was none.
  @discardableResult
  public func unlink<F, T>(_ relation: ModelRelation<F, T>, from: String, to: String) throws -> Bool {
    try checkOpen()
    try db.execute(
      "DELETE FROM model_links WHERE relation = ? AND from_type = ? AND from_id = ? AND to_type = ? AND to_id = ?",
      [relation.name, F.modelType, from, T.modelType, to])
    guard db.changes > 0 else { return false }
    touch(F.modelType, T.modelType)
    return true
  }

  /// Whether `from` links to `to`, as this transaction sees it.
  public func isLinked<F, T>(_ relation: ModelRelation<F, T>, from: String, to: String) throws -> Bool {
    try checkOpen()
    return try ModelRelations.isLinked(relation, from: from, to: to, in: db)
  }
}

extension ModelStore {
  /// Links `from` to `to` in a transaction of its own; false if they were linked already.
  @discardableResult
  public func link<F, T>(_ relation: ModelRelation<F, T>, from: String, to: String) throws -> Bool {
    try write { try $0.link(relation, from: from, to: to) }
  }

  /// Removes the link in a transaction of its own; false if there was none.
  @discardableResult
  public func unlink<F, T>(_ relation: ModelRelation<F, T>, from: String, to: String) throws -> Bool {
    try write { try $0.unlink(relation, from: from, to: to) }
  }

  /// Whether `from` links to `to`: one indexed lookup.
  public func isLinked<F, T>(_ relation: ModelRelation<F, T>, from: String, to: String) throws -> Bool {
    try catalog.read(snapshot: false) { try ModelRelations.isLinked(relation, from: from, to: to, in: $0) }
  }

  /// How many models `id` links to, counted in the index without loading them.
  public func count<F, T>(_ relation: ModelRelation<F, T>, from id: String) throws -> Int {
    try catalog.read(snapshot: false) { try ModelRelations.count(relation, id: id, outgoing: true, in: $0) }
  }

  /// How many models link to `id`, counted in the index without loading them.
  public func count<F, T>(_ relation: ModelRelation<F, T>, to id: String) throws -> Int {
    try catalog.read(snapshot: false) { try ModelRelations.count(relation, id: id, outgoing: false, in: $0) }
  }
}
