import Foundation
import Larder

/// Where the store is: every command that opens it (serve, put, get, ls, stat, rm, gc, verify)
/// takes this group, so an option about the store (a catalog URL, say) is added here once and
/// reaches all of them, in parsing and in `--help`.
///
/// ```swift
/// static let catalog = Option.value("--catalog", "URL", environment: "LARDER_CATALOG", help: "…")
/// static let options = DataOptions.options + [catalog]
/// ```
struct StoreOptions: OptionGroup {
  static let catalog = Option.value(
    "--catalog", "URL", environment: "LARDER_CATALOG",
    help: "the catalog: postgres://user@host:port/db[?schema=name] shared by several nodes (default: SQLite in the data directory)")
  static let options = DataOptions.options + [catalog]

  var data: DataOptions
  /// nil: SQLite in the data directory.
  var catalog: CatalogLocation?

  init(_ arguments: ParsedArguments) throws(UsageError) {
    data = try DataOptions(arguments)
    if let text = arguments.value(Self.catalog), !text.isEmpty {
      do {
        catalog = try CatalogLocation(parsing: text)
      } catch {
        throw UsageError("--catalog: \(error)")
      }
    }
  }

  /// The store, without the background MD5 worker: a command that exits right after its work
  /// must not leave a pass hashing (blobs it commits without an MD5 are filled by a running
  /// server's worker, or on demand).
  func open() throws -> Larder {
    try Larder(at: data.directory, configuration: .init(backgroundMD5: false, catalog: catalog))
  }
}
