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
  /// Types whose reference rules this transaction checked (the store learns them at commit).
  private(set) var rulesRecorded: Set<String> = []

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
    try upsertRecord(type: type, id: model.id, body: body, now: Date())
    try replaceAttachments(type: type, id: model.id, found)
    try recordReferences(of: model, body: body)
    touchedTypes.insert(type)
  }

  /// Replaces the model's reference rows with what its declared references hold now, each
  /// target checked to exist in this transaction (``ModelReference``).
  private func recordReferences<T: Model>(of model: T, body: String) throws {
    var fields: Set<String> = []
    for reference in T.references {
      guard fields.insert(reference.field).inserted else {
        throw ModelError.invalidQuery("\(T.modelType) declares the reference '\(reference.field)' twice")
      }
      _ = try QuerySQL.typeLiteral(reference.targetType)
      _ = try QuerySQL.jsonPath(reference.field)
    }
    try recordRules(of: T.self)
    let json = T.references.isEmpty ? NSNull() : try JSONSerialization.jsonObject(with: Data(body.utf8), options: [.fragmentsAllowed])
    try replaceReferences(type: T.modelType, id: model.id, body: json, rules: T.references)
  }

  /// Inserts or replaces one record's body.
  func upsertRecord(type: String, id: String, body: String, now: Date) throws {
    try db.execute(
      """
      INSERT INTO records(type, id, body, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT(type, id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at
      """, [type, id, body, now, now])
  }

  /// Replaces a record's attachment rows (the files must exist: checked by the caller).
  func replaceAttachments(type: String, id: String, _ attachments: [Attachment]) throws {
    try db.execute("DELETE FROM attachments WHERE record_type = ? AND record_id = ?", [type, id])
    for attachment in attachments {
      try db.execute(
        "INSERT INTO attachments(record_type, record_id, property, position, file_id) VALUES (?, ?, ?, ?, ?)",
        [type, id, attachment.property, attachment.position, attachment.fileID])
    }
  }

  /// Replaces a record's reference rows with those `rules` find in its parsed `body`, each
  /// target checked to exist in this transaction.
  /// - Throws: ``ModelError/invalidReference(type:id:field:)``,
  ///   ``ModelError/referenceNotFound(type:id:field:targetType:targetID:)``.
  func replaceReferences(type: String, id: String, body: Any, rules: [ModelReference]) throws {
    try db.execute("DELETE FROM model_references WHERE record_type = ? AND record_id = ?", [type, id])
    for rule in rules {
      guard let value = try ModelReference.value(at: rule.field, in: body) else { continue }
      guard let targetID = value as? String else {
        throw ModelError.invalidReference(type: type, id: id, field: rule.field)
      }
      guard try exists(type: rule.targetType, id: targetID) else {
        throw ModelError.referenceNotFound(
          type: type, id: id, field: rule.field, targetType: rule.targetType, targetID: targetID)
      }
      try db.execute(
        """
        INSERT INTO model_references(record_type, record_id, property, target_type, target_id, on_delete)
        VALUES (?, ?, ?, ?, ?, ?)
        """, [type, id, rule.field, rule.targetType, targetID, rule.onDelete.rawValue])
    }
  }

  /// The references `type` declared at its last typed save (`model_reference_rules`).
  func recordedRules(of type: String) throws -> [ModelReference] {
    try db.rows("SELECT property, target_type, on_delete FROM model_reference_rules WHERE record_type = ?", [type])
      .map {
        ModelReference(
          field: $0.string("property") ?? "", targetType: $0.string("target_type") ?? "",
          onDelete: $0.string("on_delete").flatMap(DeleteRule.init(rawValue:)) ?? .restrict)
      }
  }

  /// Keeps the type's declared references in `model_reference_rules` (checked once per store
  /// and type; written only when they changed), for imports that have no Swift type.
  private func recordRules<T: Model>(of type: T.Type) throws {
    guard !store.hasRecordedRules(T.modelType), rulesRecorded.insert(T.modelType).inserted else { return }
    try replaceRecordedRules(of: T.modelType, with: T.references)
  }

  /// Makes `rules` the references recorded for `type` (written only when they differ).
  func replaceRecordedRules(of type: String, with rules: [ModelReference]) throws {
    guard Set(rules) != Set(try recordedRules(of: type)) else { return }
    try db.execute("DELETE FROM model_reference_rules WHERE record_type = ?", [type])
    for reference in rules {
      _ = try QuerySQL.typeLiteral(reference.targetType)
      _ = try QuerySQL.jsonPath(reference.field)
      try db.execute(
        "INSERT INTO model_reference_rules(record_type, property, target_type, on_delete) VALUES (?, ?, ?, ?)",
        [type, reference.field, reference.targetType, reference.onDelete.rawValue])
    }
  }

  func exists(type: String, id: String) throws -> Bool {
    try db.row("SELECT 1 AS found FROM records WHERE type = ? AND id = ?", [type, id]) != nil
  }

  /// Deletes the model and its attachments; false if there was none.
  @discardableResult
  public func delete<T: Model>(_ model: T) throws -> Bool {
    try delete(T.self, id: model.id)
  }

  /// Deletes the model of this type and id and its attachments; false if there was none.
  @discardableResult
  ///
  /// Models that refer to it are deleted with it, set to null or refuse the delete, as their
  /// ``ModelReference`` says; a refusal changes nothing.
  /// - Throws: ``ModelError/deleteRestricted(type:id:referrerType:referrerID:field:)``.
  public func delete<T: Model>(_ type: T.Type, id: String) throws -> Bool {
    try checkOpen()
    // The type's declared references are the store's from its first typed use, a delete too.
    try recordRules(of: T.self)
    return try deleteRecord(RecordKey(type: T.modelType, id: id))
  }

  private struct RecordKey: Hashable {
    let type: String
    let id: String
  }

  /// A reference row pointing at a model being deleted.
  private struct Referrer {
    let target: RecordKey
    let holder: RecordKey
    let field: String
    let rule: DeleteRule
  }

  /// Deletes `root` and every model that refers to a deleted one with cascade (each once, so
  /// cycles end); then refuses if a model that stays points at a deleted one with restrict,
  /// before changing anything, and nulls the fields of those that point with nullify.
  private func deleteRecord(_ root: RecordKey) throws -> Bool {
    guard try exists(type: root.type, id: root.id) else { return false }
    var doomed = [root]
    var seen: Set<RecordKey> = [root]
    var pointing: [Referrer] = []
    var next = 0
    while next < doomed.count {
      let target = doomed[next]
      next += 1
      let rows = try db.rows(
        "SELECT record_type, record_id, property, on_delete FROM model_references WHERE target_type = ? AND target_id = ?",
        [target.type, target.id])
      for row in rows {
        let holder = RecordKey(type: row.string("record_type") ?? "", id: row.string("record_id") ?? "")
        // The column's CHECK admits only the three rules; restrict is the safe reading of anything else.
        let rule = row.string("on_delete").flatMap(DeleteRule.init(rawValue:)) ?? .restrict
        if rule == .cascade, seen.insert(holder).inserted { doomed.append(holder) }
        pointing.append(Referrer(target: target, holder: holder, field: row.string("property") ?? "", rule: rule))
      }
    }
    let staying = pointing.filter { !seen.contains($0.holder) }
    if let refusal = staying.first(where: { $0.rule == .restrict }) {
      throw ModelError.deleteRestricted(
        type: refusal.target.type, id: refusal.target.id, referrerType: refusal.holder.type,
        referrerID: refusal.holder.id, field: refusal.field)
    }
    let now = Date()
    for referrer in staying {  // every one is nullify: cascades are in `seen`, restricts refused
      try db.execute(
        "UPDATE records SET body = \(try db.dialect.bodySettingNull(referrer.field)), updated_at = ? WHERE type = ? AND id = ?",
        [now, referrer.holder.type, referrer.holder.id])
      try db.execute(
        "DELETE FROM model_references WHERE record_type = ? AND record_id = ? AND property = ?",
        [referrer.holder.type, referrer.holder.id, referrer.field])
      touchedTypes.insert(referrer.holder.type)
    }
    // The deleted models' own references first, so none points at a deleted one when it goes
    // (the catalog's foreign key checks at each statement). Attachments go with their record:
    // their foreign key is ON DELETE CASCADE (foreign_keys=ON).
    for key in doomed {
      try db.execute("DELETE FROM model_references WHERE record_type = ? AND record_id = ?", [key.type, key.id])
    }
    for key in doomed {
      try db.execute("DELETE FROM records WHERE type = ? AND id = ?", [key.type, key.id])
      touchedTypes.insert(key.type)
    }
    return true
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
  func prepare<T: Model>(_ type: T.Type) throws {
    guard !T.indexes.isEmpty, !store.isIndexed(T.modelType), !indexedTypes.contains(T.modelType) else { return }
    try ModelStore.createIndexes(T.self, in: db)
    indexedTypes.insert(T.modelType)
  }

  func touch(_ types: String...) { touchedTypes.formUnion(types) }

  func checkOpen() throws {
    guard isOpen else { throw ModelError.invalidQuery("a ModelTransaction is used after its write closure returned") }
  }
}

@available(*, unavailable)
extension ModelTransaction: Sendable {}
