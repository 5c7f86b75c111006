import Dispatch
import Foundation
import Synchronization

/// Saves, finds, queries and observes ``Model``s; their `File` properties become attachments.
///
/// ```swift
/// try larder.models.save(user)                                  // record + attachments, one transaction
/// let u = try larder.models.find(User.self, id: "u1")
/// let page = try larder.models.query(Query(User.self).filter(Field("age") > 30).limit(10))
/// let token = try larder.models.observe(Query(User.self)) { change in … }
/// try larder.write { tx in try tx.save(a); try tx.delete(b) }  // atomic across models
/// ```
/// Saving replaces the model's attachment rows in the same transaction as its record, so a
/// `File` removed from a property is released and one still used is always referenced.
/// The store is `Sendable`: use it from any number of tasks. Writes are serialised on the
/// catalog's writer; reads run on their own snapshots. Do not call the store from inside a
/// ``write(_:)`` closure (use the transaction there): the writer is not re-entrant.
public struct ModelStore: Sendable {
  let catalog: Catalog
  let center: ObservationCenter
  /// Hears other processes' model commits (see ``ModelChangeListener``).
  let listener = ModelChangeListener()
  /// Model types whose declared indexes exist.
  private let indexedTypes: KnownTypes
  /// Model types whose declared references `model_reference_rules` holds as this process
  /// declares them.
  private let ruledTypes: KnownTypes

  init(catalog: Catalog) {
    self.catalog = catalog
    center = ObservationCenter()
    indexedTypes = KnownTypes()
    ruledTypes = KnownTypes()
  }

  // MARK: Writing

  /// Runs `body` in one write transaction; everything it saves and deletes commits together or
  /// not at all. Observers are told after the commit.
  /// - Throws: whatever `body` throws (then nothing is saved), or a ``DatabaseError``.
  public func write<R>(_ body: (ModelTransaction) throws -> R) throws -> R {
    let (value, touched, indexed, ruled) = try catalog.write { db in
      let tx = ModelTransaction(db: db, store: self)
      defer { tx.isOpen = false }
      let value = try body(tx)
      // On PostgreSQL other processes and nodes observe too: NOTIFY is delivered at commit.
      if let announcing = db as? any CommitAnnouncingDatabase, !tx.touchedTypes.isEmpty {
        try announcing.announce(modelTypes: tx.touchedTypes.sorted())
      }
      return (value, tx.touchedTypes, tx.indexedTypes, tx.rulesRecorded)
    }
    indexedTypes.insert(indexed)
    ruledTypes.insert(ruled)
    center.committed(types: touched)
    return value
  }

  /// Saves (inserts or replaces) `model` and its attachments in one transaction.
  /// - Throws: ``LarderError/fileNotFound(id:)`` if a `File` in it is not in the store (nothing
  ///   is saved), ``ModelError``.
  public func save<T: Model>(_ model: T) throws {
    try write { try $0.save(model) }
  }

  /// Saves several models in one transaction.
  public func save<T: Model>(_ models: [T]) throws {
    try write { tx in for model in models { try tx.save(model) } }
  }

  /// Deletes the model and its attachments; false if there was none.
  @discardableResult
  public func delete<T: Model>(_ model: T) throws -> Bool {
    try write { try $0.delete(model) }
  }

  /// Deletes the model of this type and id and its attachments; false if there was none.
  @discardableResult
  public func delete<T: Model>(_ type: T.Type, id: String) throws -> Bool {
    try write { try $0.delete(type, id: id) }
  }

  // MARK: Reading

  /// The model of this type and id, or nil.
  /// - Throws: ``ModelError/decodingFailed(type:id:message:)`` if its body no longer decodes.
  public func find<T: Model>(_ type: T.Type, id: String) throws -> T? {
    try catalog.read { db in try Self.find(type, id: id, in: db) }
  }

  /// The models matching `query`, in its order.
  /// - Throws: ``ModelError/invalidFieldPath(_:)``, ``ModelError/decodingFailed(type:id:message:)``.
  public func query<T: Model>(_ query: Query<T>) throws -> [T] {
    try fetchRows(query).map { try Self.decode(T.self, id: $0.id, body: $0.body) }
  }

  /// How many models match the query's filters (its window is ignored).
  public func count<T: Model>(_ query: Query<T>) throws -> Int {
    try ensureIndexes(T.self)
    let compiled = try QuerySQL.select("count(*) AS n", query, window: false, dialect: catalog.dialect)
    return try catalog.read { db in Int(try db.row(compiled.sql, compiled.arguments)?.int("n") ?? 0) }
  }

  /// The model's attachment rows, by position.
  public func attachments<T: Model>(of type: T.Type, id: String) throws -> [Attachment] {
    try catalog.read { db in try Self.attachments(type: T.modelType, id: id, in: db) }
  }

  /// The query's plan, to check which index it uses: SQLite's `EXPLAIN QUERY PLAN` details
  /// (`SEARCH records USING INDEX …`), or PostgreSQL's `EXPLAIN` lines (`Index Scan using …`).
  public func queryPlan<T: Model>(_ query: Query<T>) throws -> [String] {
    try ensureIndexes(T.self)
    let compiled = try QuerySQL.select("id, body", query, dialect: catalog.dialect)
    return try catalog.read { db in try db.dialect.queryPlan(compiled.sql, compiled.arguments, on: db) }
  }

  // MARK: Observing

  /// Delivers `.initial(results)`, then an `.update` after each commit that changed the query's
  /// result, on a serial queue of the observation's own. Commits of other processes count too:
  /// on SQLite those on the same data directory (heard within a few milliseconds through the
  /// WAL-index commit stamp), on PostgreSQL those of every process and node (`LISTEN/NOTIFY`).
  ///
  /// Keep the token: observation ends when it is cancelled or released.
  /// ```swift
  /// let token = try larder.models.observe(Query(User.self).sorted(by: "name")) { change in
  ///   rows = change.applied(to: rows)
  /// }
  /// ```
  /// - Throws: ``ModelError`` if the query is invalid (checked before anything is delivered).
  public func observe<T: Model>(
    _ query: Query<T>, _ handler: @escaping @Sendable (ModelChange<T>) -> Void
  ) throws -> ObservationToken {
    _ = try QuerySQL.select("id", query, dialect: catalog.dialect)
    let observer = QueryObserver(query: query, store: self, handler: handler)
    let id = center.add(type: T.modelType) { observer.schedule() }
    let center = self.center
    observer.schedule()
    listener.ensureRunning(catalog: catalog, center: center)
    return ObservationToken {
      observer.cancel()
      center.remove(id)
    }
  }

  /// The same changes as ``observe(_:_:)``, as an asynchronous sequence; observation ends when
  /// the iterating task ends or is cancelled.
  /// ```swift
  /// for await change in try larder.models.observations(of: Query(User.self)) { … }
  /// ```
  public func observations<T: Model>(of query: Query<T>) throws -> AsyncStream<ModelChange<T>> {
    let (stream, continuation) = AsyncStream.makeStream(of: ModelChange<T>.self, bufferingPolicy: .unbounded)
    let token = try observe(query) { continuation.yield($0) }
    continuation.onTermination = { _ in token.cancel() }
    return stream
  }

  /// Live observations (for tests).
  var observerCount: Int { center.count }

  // MARK: Internals

  func fetchRows<T: Model>(_ query: Query<T>) throws -> [(id: String, body: String)] {
    try ensureIndexes(T.self)
    let compiled = try QuerySQL.select("id, body", query, dialect: catalog.dialect)
    return try catalog.read { db in try Self.rows(compiled, in: db) }
  }

  static func rows(_ compiled: QuerySQL.Compiled, in db: Database) throws -> [(id: String, body: String)] {
    try db.rows(compiled.sql, compiled.arguments).map { ($0.string("id") ?? "", $0.string("body") ?? "") }
  }

  static func find<T: Model>(_ type: T.Type, id: String, in db: Database) throws -> T? {
    guard let body = try db.row("SELECT body FROM records WHERE type = ? AND id = ?", [T.modelType, id])?.string("body")
    else { return nil }
    return try decode(T.self, id: id, body: body)
  }

  static func attachments(type: String, id: String, in db: Database) throws -> [Attachment] {
    try db.rows(
      "SELECT property, position, file_id FROM attachments WHERE record_type = ? AND record_id = ? ORDER BY position",
      [type, id]
    ).map {
      Attachment(property: $0.string("property") ?? "", position: Int($0.int("position") ?? 0), fileID: $0.string("file_id") ?? "")
    }
  }

  static func decode<T: Model>(_ type: T.Type, id: String, body: String) throws -> T {
    do {
      return try JSONDecoder().decode(T.self, from: Data(body.utf8))
    } catch {
      throw ModelError.decodingFailed(type: T.modelType, id: id, message: "\(error)")
    }
  }

  static func encode<T: Model>(_ model: T) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    do {
      return String(decoding: try encoder.encode(model), as: UTF8.self)
    } catch {
      throw ModelError.encodingFailed(type: T.modelType, message: "\(error)")
    }
  }

  /// Creates the type's declared indexes once per store, on the writer.
  func ensureIndexes<T: Model>(_ type: T.Type) throws {
    guard !T.indexes.isEmpty, !indexedTypes.contains(T.modelType) else { return }
    try catalog.write { db in try Self.createIndexes(T.self, in: db) }
    indexedTypes.insert([T.modelType])
  }

  static func createIndexes<T: Model>(_ type: T.Type, in db: Database) throws {
    for index in T.indexes {
      try db.execute(try QuerySQL.createIndex(type: T.modelType, index: index, dialect: db.dialect))
    }
  }

  func isIndexed(_ type: String) -> Bool { indexedTypes.contains(type) }
  func hasRecordedRules(_ type: String) -> Bool { ruledTypes.contains(type) }
}

/// Model types a store has done something for once (created their indexes, recorded their
/// reference rules), shared by copies of the store.
final class KnownTypes: Sendable {
  private let types = Mutex<Set<String>>([])
  func contains(_ type: String) -> Bool { types.withLock { $0.contains(type) } }
  func insert(_ more: Set<String>) {
    guard !more.isEmpty else { return }
    types.withLock { $0.formUnion(more) }
  }
}
