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

  /// The catalog a store in `directory` uses when none is configured: the data directory's
  /// SQLite file, unless the test hook `LARDER_TEST_CATALOG` names a PostgreSQL database. Then
  /// the store gets a schema of its own named after the directory, so every test's store is
  /// fresh, a store reopened from the same directory finds its rows again, and a `larder`
  /// process started on that directory (which inherits the variable) shares them.
  static func defaultLocation(for directory: URL) -> CatalogLocation {
    guard let base = ProcessInfo.processInfo.environment["LARDER_TEST_CATALOG"], !base.isEmpty,
      case .postgres(let url)? = try? CatalogLocation(parsing: base)
    else { return .dataDirectory }
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a of the standardised path
    for byte in directory.standardizedFileURL.path.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    let separator = url.contains("?") ? "&" : "?"
    return .postgres(url + separator + "schema=t_" + String(hash, radix: 16))
  }

  /// The libpq connection string (the URL without `schema`) and the schema, if one is named.
  func postgresParts() throws -> (conninfo: String, schema: String?) {
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
