import Foundation
import Larder

/// `larder catalog migrate`: applies the catalog's schema migrations and reports its version.
struct CatalogMigrateCommand: Command {
  static let configuration = CommandConfiguration(
    name: "catalog migrate", summary: "apply the catalog's schema migrations (SQLite or PostgreSQL)",
    discussion: """
      Every node also migrates when it opens the store; this does it ahead of a rollout. On
      PostgreSQL migrations run under the catalog's advisory write lock, so nodes starting
      together apply each one once. A catalog newer than this larder is refused (exit 1).
      """,
    groups: [StoreOptions.self])

  var store: StoreOptions

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
  }

  func run() throws {
    let larder = try store.open()
    print("catalog \(larder.catalogLocation): schema version \(Larder.catalogSchemaVersion)")
  }
}

/// `larder catalog copy --from DIR --to URL`: moves a data directory's SQLite catalog to PostgreSQL.
struct CatalogCopyCommand: Command {
  static let from = Option.value("--from", "DIR", required: true, help: "the data directory whose larder.sqlite is copied")
  static let to = Option.value("--to", "URL", required: true, help: "the destination: postgres://user@host:port/db[?schema=name], empty")

  static let configuration = CommandConfiguration(
    name: "catalog copy", summary: "copy a data directory's catalog into an empty PostgreSQL catalog",
    discussion: """
      Copies every row in one transaction and checks each table's count afterwards; nothing is
      committed unless all match. Stop writers first. The blobs stay in the data directory:
      serve it with --catalog set to the destination.
      """,
    options: [from, to])

  var source: URL
  var destination: CatalogLocation

  init(_ arguments: ParsedArguments) throws(UsageError) {
    source = URL(fileURLWithPath: arguments.value(Self.from) ?? "")
    do {
      destination = try CatalogLocation(parsing: arguments.value(Self.to) ?? "")
    } catch {
      throw UsageError("--to: \(error)")
    }
    guard case .postgres = destination else { throw UsageError("--to must be a postgres:// URL") }
  }

  func run() throws {
    let counts = try Larder.copyCatalog(from: source, to: destination, backends: StoreOptions.backends)
    let width = counts.map(\.0.count).max() ?? 0
    for (table, count) in counts {
      print("\(table.padding(toLength: width, withPad: " ", startingAt: 0)) \(count)")
    }
    print("copied to \(destination); counts match")
  }
}
