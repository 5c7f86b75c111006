import Foundation
import Larder
import LarderPostgres
import LarderS3Store

/// Where this test run's stores keep their catalog and blobs, and how to open them.
///
/// `make test` runs the suites on the embedded store, then again with `LARDER_TEST_CATALOG`
/// naming a PostgreSQL database and, in the S3 pass, `LARDER_TEST_BLOBS` naming a bucket. Then
/// every store gets a schema (and a key prefix) of its own named after its data directory, so
/// every test's store is fresh, a store reopened from the same directory finds its rows again,
/// and a `larder` process started on that directory with ``processEnvironment(for:)`` shares
/// them. The library itself reads none of these variables: tests open stores through here.
/// ```swift
/// let larder = try TestStore.temporary()
/// let reopened = try TestStore.open(at: directory, configuration: .init(backgroundMD5: false))
/// ```
public enum TestStore {
  private static let environment = ProcessInfo.processInfo.environment
  /// The PostgreSQL database of this run, if any (a `postgres://` URL).
  public static let catalogBase = environment["LARDER_TEST_CATALOG"].flatMap { $0.isEmpty ? nil : $0 }
  /// The bucket of this run, if any (an `s3://` URL).
  public static let blobsBase = environment["LARDER_TEST_BLOBS"].flatMap { $0.hasPrefix("s3://") ? $0 : nil }

  /// Waits (at most 30 s) until every event in `larder`'s outbox has settled: on PostgreSQL,
  /// until every transaction that began before the last one's has finished (the feed and the
  /// subscriptions' heads read only below that horizon). A test that claims deliveries right
  /// after its own changes then gets them all, whatever other suites on the cluster hold open.
  public static func settle(_ larder: Larder) throws {
    let deadline = ContinuousClock.now + .seconds(30)
    let total = try larder.events.outbox().count
    while try larder.events.feed(after: .start, limit: 1000).events.count < min(total, 1000),
      ContinuousClock.now < deadline
    {
      Thread.sleep(forTimeInterval: 0.02)
    }
  }

  /// The catalog of the store in `directory` this run uses; nil: SQLite in the directory.
  public static func catalog(for directory: URL) -> CatalogLocation? {
    guard let base = catalogBase, case .postgres(let url)? = try? CatalogLocation(parsing: base) else { return nil }
    return .postgres(url + (url.contains("?") ? "&" : "?") + "schema=t_" + tag(of: directory))
  }

  /// The blobs of the store in `directory` this run uses; nil: the directory's `blobs/`.
  public static func blobs(for directory: URL) -> BlobLocation? {
    guard let base = blobsBase else { return nil }
    return .s3(url: base + (base.contains("?") ? "&" : "?") + "prefix=t_" + tag(of: directory), credentialsFile: nil)
  }

  /// Fills a nil `catalog` and `blobs` with this run's for the store in `directory` (a service's
  /// options, say).
  public static func fill(_ catalog: inout CatalogLocation?, _ blobs: inout BlobLocation?, for directory: URL) {
    catalog = catalog ?? self.catalog(for: directory)
    blobs = blobs ?? self.blobs(for: directory)
  }

  /// `configuration` with this run's catalog and blobs where it names none, and every backend.
  public static func configuration(_ configuration: Larder.Configuration = .init(), for directory: URL)
    -> Larder.Configuration
  {
    var configured = configuration
    fill(&configured.catalog, &configured.blobs, for: directory)
    configured.backends = [configuration.backends, .postgres, .s3]
    return configured
  }

  /// Opens (creating if needed) the store in `directory` on this run's catalog and blobs.
  public static func open(at directory: URL, configuration: Larder.Configuration = .init()) throws -> Larder {
    try Larder(at: directory, configuration: self.configuration(configuration, for: directory))
  }

  /// A store in a new temporary directory, removed when the store is released.
  public static func temporary(configuration: Larder.Configuration = .init()) throws -> Larder {
    let directory = Larder.newTemporaryDirectory()
    return try Larder.temporary(at: directory, configuration: self.configuration(configuration, for: directory))
  }

  /// The variables that make a `larder` process on `directory` open the store this run's
  /// tests open there (`LARDER_CATALOG`, `LARDER_BLOBS`: the CLI's own options).
  public static func processEnvironment(for directory: URL) -> [String: String] {
    var variables: [String: String] = [:]
    if case .postgres(let url)? = catalog(for: directory) { variables["LARDER_CATALOG"] = url }
    if case .s3(let url, _)? = blobs(for: directory) { variables["LARDER_BLOBS"] = url }
    return variables
  }

  /// A name for the store in `directory`: FNV-1a of its standardised path, in hex.
  private static func tag(of directory: URL) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in directory.standardizedFileURL.path.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    return String(hash, radix: 16)
  }
}
