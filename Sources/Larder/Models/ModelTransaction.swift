import Foundation

/// The models side of one write transaction, handed to ``ModelStore/write(_:)`` and
/// `Larder.write(_:)`.
///
/// ```swift
/// try larder.write { tx in
///   try tx.save(order)
///   try tx.delete(Cart.self, id: order.cartID)
/// }
/// ```
/// Valid only inside the closure; it reads its own uncommitted writes.
public final class ModelTransaction {
  let db: Database
  let store: ModelStore
  var isOpen = true
  private(set) var touchedTypes: Set<String> = []
  private(set) var indexedTypes: Set<String> = []

  init(db: Database, store: ModelStore) {
    self.db = db
    self.store = store
  }

  /// Saves (inserts or replaces) `model`, replacing its attachment rows.
  ///
  /// Every `File` in the model must exist in the store, checked under the write lock so the
  /// collector cannot remove it in between.
  /// - Throws: ``LarderError/fileNotFound(id:)``, ``ModelError``; the whole transaction then
  ///   rolls back.
  public func save<T: Model>(_ model: T) throws {
    try checkOpen()
    let type = T.modelType
    _ = try QuerySQL.typeLiteral(type)
    guard !model.id.isEmpty else { throw ModelError.emptyIdentifier(type: type) }
    try prepare(T.self)
    let body = try ModelStore.encode(model)
    let found: [Attachment]
    do {
      found = try FileDiscovery.attachments(in: model)
    } catch {
      throw ModelError.encodingFailed(type: type, message: "\(error)")
    }
    let ids = Set(found.map(\.fileID))
    if !ids.isEmpty {
      let list = String(decoding: try JSONEncoder().encode(ids.sorted()), as: UTF8.self)
      let members = db.dialect.jsonArrayStrings
      let existing = Set(
        try db.rows("SELECT id FROM files WHERE id IN (\(members))", [list]).compactMap {
          $0.string("id")
        })
      if let missing = found.first(where: { !existing.contains($0.fileID) }) {
        throw LarderError.fileNotFound(id: missing.fileID)
      }
    }
    let now = Date()
    try db.execute(
      """
      INSERT INTO records(type, id, body, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT(type, id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at
      """, [type, model.id, body, now, now])
    try db.execute("DELETE FROM attachments WHERE record_type = ? AND record_id = ?", [type, model.id])
    for attachment in found {
      try db.execute(
        "INSERT INTO attachments(record_type, record_id, property, position, file_id) VALUES (?, ?, ?, ?, ?)",
        [type, model.id, attachment.property, attachment.position, attachment.fileID])
    }
    touchedTypes.insert(type)
  }

  /// Deletes the model and its attachments; false if there was none.
  @discardableResult
  public func delete<T: Model>(_ model: T) throws -> Bool {
    try delete(T.self, id: model.id)
  }

  /// Deletes the model of this type and id and its attachments; false if there was none.
  @discardableResult
  public func delete<T: Model>(_ type: T.Type, id: String) throws -> Bool {
    try checkOpen()
    // Its attachments go with it: their foreign key is ON DELETE CASCADE (foreign_keys=ON).
    try db.execute("DELETE FROM records WHERE type = ? AND id = ?", [T.modelType, id])
    let deleted = db.changes > 0
    if deleted { touchedTypes.insert(T.modelType) }
    return deleted
  }

  /// The model of this type and id as this transaction sees it, or nil.
  public func find<T: Model>(_ type: T.Type, id: String) throws -> T? {
    try checkOpen()
    return try ModelStore.find(type, id: id, in: db)
  }

  /// The models matching `query` as this transaction sees them.
  public func query<T: Model>(_ query: Query<T>) throws -> [T] {
    try checkOpen()
    try prepare(T.self)
    let compiled = try QuerySQL.select("id, body", query, dialect: db.dialect)
    return try ModelStore.rows(compiled, in: db).map { try ModelStore.decode(T.self, id: $0.id, body: $0.body) }
  }

  /// Creates the type's indexes inside this transaction if the store has not yet.
  private func prepare<T: Model>(_ type: T.Type) throws {
    guard !T.indexes.isEmpty, !store.isIndexed(T.modelType), !indexedTypes.contains(T.modelType) else { return }
    try ModelStore.createIndexes(T.self, in: db)
    indexedTypes.insert(T.modelType)
  }

  private func checkOpen() throws {
    guard isOpen else { throw ModelError.invalidQuery("a ModelTransaction is used after its write closure returned") }
  }
}

@available(*, unavailable)
extension ModelTransaction: Sendable {}
