import Foundation
import Larder
import LarderPostgres
import LarderS3Store

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
  static let blobs = Option.value(
    "--blobs", "URL", environment: "LARDER_BLOBS",
    help:
      "where content lives: s3://BUCKET?endpoint=URL&region=R&path-style=1 shared by several nodes (default: the data directory)"
  )
  static let s3Credentials = Option.value(
    "--s3-credentials", "FILE", environment: "LARDER_S3_CREDENTIALS",
    help: "the S3 access key and secret (default: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
  static let options = DataOptions.options + [catalog, blobs, s3Credentials]

  /// Every backend the CLI can open a store on.
  static let backends: StoreBackends = [.postgres, .s3]
  /// What the stores the command opens inject: none, but in the test-only `larder-crashing`
  /// (``LarderCLI/main(faults:)``, through the parsed arguments).
  let faults: FaultInjector

  var data: DataOptions
  /// nil: SQLite in the data directory.
  var catalog: CatalogLocation?
  /// nil: blobs in the data directory.
  var blobs: BlobLocation?

  init(_ arguments: ParsedArguments) throws(UsageError) {
    data = try DataOptions(arguments)
    faults = arguments.faults
    if let text = arguments.value(Self.catalog), !text.isEmpty {
      do {
        catalog = try CatalogLocation(parsing: text)
      } catch {
        throw UsageError("--catalog: \(error)")
      }
    }
    let credentials = arguments.value(Self.s3Credentials).flatMap { $0.isEmpty ? nil : $0 }
    if let text = arguments.value(Self.blobs), !text.isEmpty {
      do {
        blobs = try BlobLocation(parsing: text, credentialsFile: credentials)
      } catch {
        throw UsageError("--blobs: \(error)")
      }
    } else if credentials != nil {
      throw UsageError("--s3-credentials needs --blobs s3://…")
    }
  }

  /// The store, without the background MD5 worker: a command that exits right after its work
  /// must not leave a pass hashing (blobs it commits without an MD5 are filled by a running
  /// server's worker, or on demand).
  func open(readOnly: Bool = false) throws -> Larder {
    var configuration = configuration(backgroundMD5: false)
    configuration.readOnly = readOnly
    return try Larder(at: data.directory, configuration: configuration)
  }

  /// The store's configuration as the options give it.
  func configuration(backgroundMD5: Bool) -> Larder.Configuration {
    .init(faults: faults, backgroundMD5: backgroundMD5, catalog: catalog, blobs: blobs, backends: Self.backends)
  }
}
