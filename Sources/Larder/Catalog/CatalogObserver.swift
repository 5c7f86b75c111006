/// Hears every statement a store runs on its catalog, as it runs: how tests count the catalog
/// work of one request (a row read per request, not three), injected through
/// ``Larder/Configuration/catalogObserver``. Production passes none, and then no connection is
/// wrapped.
///
/// ```swift
/// final class Counter: CatalogObserver { … func statement(_ sql: String) { lock.withLock { seen.append(sql) } } }
/// let larder = try Larder(at: dir, configuration: .init(catalogObserver: counter))
/// ```
/// Contract: called on the thread running the statement, inside its transaction; it must be
/// quick and must not touch the store.
public protocol CatalogObserver: Sendable {
  /// One statement, before it runs (its SQL with `?` placeholders, as the store wrote it).
  func statement(_ sql: String)
}

/// A connection that tells a ``CatalogObserver`` of each statement before running it on `inner`.
class ObservedDatabase: Database {
  let inner: Database
  let observer: any CatalogObserver

  /// `inner` observed, keeping the abilities the store asks connections about (a PostgreSQL
  /// connection's commit announcements).
  static func wrap(_ inner: Database, _ observer: (any CatalogObserver)?) -> Database {
    guard let observer else { return inner }
    if let announcing = inner as? any CommitAnnouncingDatabase {
      return ObservedAnnouncingDatabase(announcing, observer)
    }
    return ObservedDatabase(inner, observer)
  }

  init(_ inner: Database, _ observer: any CatalogObserver) {
    self.inner = inner
    self.observer = observer
  }

  var dialect: any SQLDialect { inner.dialect }
  var changes: Int { inner.changes }

  func execute(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) {
    observer.statement(sql)
    try inner.execute(sql, arguments)
  }

  func executeScript(_ sql: String) throws(DatabaseError) {
    observer.statement(sql)
    try inner.executeScript(sql)
  }

  func rows(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) -> [Row] {
    observer.statement(sql)
    return try inner.rows(sql, arguments)
  }

  func row(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) -> Row? {
    observer.statement(sql)
    return try inner.row(sql, arguments)
  }

  func forEachRow(_ sql: String, _ arguments: [any SQLBindable], _ body: (Row) throws -> Void) throws {
    observer.statement(sql)
    try inner.forEachRow(sql, arguments, body)
  }

  func transaction<T>(immediate: Bool, _ body: (Database) throws -> T) throws -> T {
    try inner.transaction(immediate: immediate) { db in try body(Self.wrap(db, observer)) }
  }
}

/// ``ObservedDatabase`` over a connection that announces commits (PostgreSQL's).
final class ObservedAnnouncingDatabase: ObservedDatabase, CommitAnnouncingDatabase {
  private let announcing: any CommitAnnouncingDatabase

  init(_ inner: any CommitAnnouncingDatabase, _ observer: any CatalogObserver) {
    announcing = inner
    super.init(inner, observer)
  }

  func announce(modelTypes types: [String]) throws { try announcing.announce(modelTypes: types) }
}
