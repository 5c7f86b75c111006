import Foundation

/// Where a store keeps its catalog: SQLite in the data directory (the default), or a
/// PostgreSQL database that several nodes share.
///
/// ```swift
/// let url = try CatalogLocation(parsing: "postgres://larder@db:5432/larder?schema=media")
/// let larder = try Larder(at: dataURL, configuration: .init(catalog: url))
/// ```
/// A `schema` query parameter keeps several stores in one database: the schema is created if
/// missing and every connection sets its `search_path` to it. Other parameters go to libpq.
public enum CatalogLocation: Sendable, Equatable, CustomStringConvertible {
  /// `larder.sqlite` in the data directory.
  case dataDirectory
  /// A PostgreSQL URL (`postgres://` or `postgresql://`), with an optional `?schema=`.
  case postgres(String)

  /// Parses a `postgres://` or `postgresql://` URL, or `sqlite` for the data directory.
  /// - Throws: ``LarderError/invalidArgument(_:)`` for anything else or a malformed schema name.
  public init(parsing text: String) throws {
    if text == "sqlite" || text.isEmpty {
      self = .dataDirectory
      return
    }
    guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") else {
      throw LarderError.invalidArgument("a catalog is a postgres:// URL or 'sqlite', not '\(text.prefix(80))'")
    }
    self = .postgres(text)
    _ = try postgresParts()
  }

  /// The libpq connection string (the URL without `schema`) and the schema, if one is named.
  package func postgresParts() throws -> (conninfo: String, schema: String?) {
    guard case .postgres(let url) = self else { return ("", nil) }
    guard let components = URLComponents(string: url) else {
      throw LarderError.invalidArgument("the catalog URL is malformed")
    }
    var rest = components
    let items = components.queryItems ?? []
    let schema = items.last { $0.name == "schema" }?.value
    let others = items.filter { $0.name != "schema" }
    rest.queryItems = others.isEmpty ? nil : others
    if let schema {
      let allowed = schema.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
      guard (1...63).contains(schema.utf8.count), allowed else {
        throw LarderError.invalidArgument("schema must be 1 to 63 of a-z, 0-9 and _")
      }
    }
    return (rest.string ?? url, schema)
  }

  /// The location without any password, for logs and errors.
  public var description: String {
    switch self {
    case .dataDirectory: return "sqlite (data directory)"
    case .postgres(let url):
      guard var components = URLComponents(string: url) else { return "postgres://…" }
      if components.password != nil { components.password = "***" }
      return components.string ?? "postgres://…"
    }
  }
}
