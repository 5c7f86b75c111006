import Foundation
import Larder

/// The PostgreSQL catalog: several nodes share one database (one schema per store), through
/// libpq. Hand it to a store as `backends: [.postgres]`.
struct PostgresCatalogEngine: CatalogEngine {
  let conninfo: String
  let schema: String?

  /// Reader connections a catalog opens at most, besides its one writer: each is a server process.
  static let readers = 8

  init(location: CatalogLocation) throws {
    let (url, schema) = try location.postgresParts()
    conninfo = Self.withConnectionDefaults(url)
    self.schema = schema
  }

  /// libpq's settings that notice a dead server or network in about a minute rather than the
  /// kernel's two hours, unless the URL sets them itself: connect within 10 s; keepalive probes
  /// after 30 s idle, every 10 s, 3 unanswered drop the connection; unacknowledged data for 60 s
  /// drops it too.
  static let connectionDefaults = [
    ("connect_timeout", "10"), ("keepalives", "1"), ("keepalives_idle", "30"), ("keepalives_interval", "10"),
    ("keepalives_count", "3"), ("tcp_user_timeout", "60000"),
  ]

  static func withConnectionDefaults(_ url: String) -> String {
    guard var components = URLComponents(string: url) else { return url }
    var items = components.queryItems ?? []
    for (name, value) in connectionDefaults where !items.contains(where: { $0.name == name }) {
      items.append(URLQueryItem(name: name, value: value))
    }
    components.queryItems = items
    return components.string ?? url
  }

  var dialect: any SQLDialect { PostgresDialect() }
  var readerLimit: Int? { Self.readers }
  /// Keyed writes of different contents and names commit together, each on its own session.
  var concurrentWriters: Bool { true }

  func connect(readOnly: Bool) throws -> any Database {
    let db = try PostgresDatabase(conninfo: conninfo, schema: schema)
    if readOnly { try db.executeScript("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY") }
    return db
  }

  /// Another node's commit is a round trip away: nothing cached is trusted.
  func commitStamp(on writer: any Database) -> (@Sendable () -> Int64?)? { nil }

  func commitFeed(catalog: Catalog, poll: Duration) -> any CommitFeed {
    ListeningFeed(connect: { try catalog.dedicatedConnection() })
  }

  /// PostgreSQL's write-ahead log is the server's business.
  func checkpoint(_ writer: any Database) throws {}

  /// A session-level advisory lock on a connection of its own for the whole run: one collector
  /// at a time across nodes, released by the server when the session ends (a crashed node's
  /// with its connection).
  func lockCollectors(catalog: Catalog) throws -> (any CatalogSessionLock)? {
    guard let db = try catalog.dedicatedConnection() as? PostgresDatabase else { return nil }
    let key = db.collectorLockKey
    guard try db.tryLock(key) else {
      throw MaintenanceError.collectorBusy(lockPath: "the catalog's advisory lock \(key)")
    }
    return SessionLock(db: db, key: key)
  }

  /// PostgreSQL enforces every foreign key at once and has no integrity check of its own.
  func integrityProblems(_ db: any Database) throws -> [CatalogIntegrityProblem] { [] }

  final class SessionLock: CatalogSessionLock {
    private var db: PostgresDatabase?
    let key: Int64

    init(db: PostgresDatabase, key: Int64) {
      self.db = db
      self.key = key
    }

    /// The session's end frees it too: the connection closes when the lock is released.
    func release() {
      try? db?.unlock(key)
      db = nil
    }

    deinit { release() }
  }

  /// `LISTEN`s on the store's channel, where every model write and object change announces
  /// itself inside its transaction, so PostgreSQL delivers it exactly when it commits.
  final class ListeningFeed: CommitFeed {
    private let connect: () throws -> any Database
    private var connection: PostgresDatabase?

    init(connect: @escaping () throws -> any Database) { self.connect = connect }

    func next(timeout: Duration) throws -> CommitNews {
      guard let connection else {
        guard let db = try connect() as? PostgresDatabase else { return .announced([]) }
        try db.listenForModelChanges()
        connection = db
        return .unknown  // anything committed while nobody listened
      }
      do {
        return .announced(Set(try connection.modelChanges(timeout: timeout)))
      } catch {
        self.connection = nil
        throw error
      }
    }
  }

  func migrate(_ writer: any Database) throws { try PostgresMigrations.run(on: writer) }

  func schemaVersion(_ db: any Database) throws -> Int {
    guard
      try db.row(
        "SELECT 1 AS found FROM information_schema.tables WHERE table_name = 'larder_schema' AND table_schema = current_schema()"
      ) != nil
    else { return 0 }
    return Int(try db.row("SELECT max(version) AS v FROM larder_schema")?.int("v") ?? 0)
  }
}

extension StoreBackends {
  /// Catalogs at `postgres://` URLs (``CatalogLocation/postgres(_:)``), on PostgreSQL.
  public static let postgres = StoreBackends(postgres: { try PostgresCatalogEngine(location: $0) })
}
