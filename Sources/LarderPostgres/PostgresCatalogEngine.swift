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

  func connect() throws -> any Database { try PostgresDatabase(conninfo: conninfo, schema: schema) }

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
