import Foundation
import LarderLogging

/// A Larder store: the content-addressed blobs, the catalog (SQLite, or PostgreSQL shared by
/// several nodes), files and objects.
///
/// ```swift
/// let larder = try Larder(at: URL(fileURLWithPath: "data"))
/// let object = try larder.objects.put(bucket: "app", name: "hello.txt", data: Data("hi".utf8))
/// let bytes = try larder.files.data(of: object.file, maxSize: 1 << 20)
/// ```
/// Several processes may open the same directory at once (a server and the CLI): SQLite
/// serialises their writes and temp files are locked by their writers.
public final class Larder: Sendable {
  public struct Configuration: Sendable {
    /// Failure and crash injection, for tests only (``init(faults:reserveBytes:backgroundMD5:catalog:blobs:backends:logger:catalogWriters:readOnly:)``).
    package var faults: FaultInjector
    /// Bytes kept in `<data>/reserve` so deletes and gc can commit on a full disk; 0 keeps none.
    /// Created only while the disk has four times as much free.
    public var reserveBytes: Int64
    /// Whether this process hashes, in the background, the MD5 of content committed without one
    /// (``MD5Backfill``), starting with a pass at open over what earlier runs left, and rescanning
    /// every 10 s for what other processes left. Off, the
    /// blobs keep `md5` NULL until a process that has it on (or ``FileStore/withMD5(_:)``) fills it.
    public var backgroundMD5: Bool
    /// Where the catalog lives; nil: `larder.sqlite` in the data directory.
    public var catalog: CatalogLocation?
    /// Where committed bytes live; nil: `blobs/` in the data directory. Temp files and the
    /// staging files of resumable uploads stay in the data directory either way (with S3, the
    /// bucket holds their bytes too: see ``UploadStore``).
    public var blobs: BlobLocation?
    /// The backends that open a catalog or blobs outside the data directory (`.postgres` from
    /// `LarderPostgres`, `.s3` from `LarderS3Store`); the embedded default needs none.
    public var backends: StoreBackends
    /// Where the store says what it did not do and why (a check it skipped, an error it recovered
    /// from); standard error unless replaced.
    public var logger: Logger
    /// With a PostgreSQL catalog: writer connections this process opens at most, so that writes
    /// of different contents and names commit together (each is a server process). SQLite has
    /// one writer whatever this says.
    public var catalogWriters: Int
    /// Opens the store to look without touching it (`larder gc --dry-run`): no recovery, no
    /// migration (a catalog that needs one is refused, saying so), no directory, reserve or
    /// identity made, no background MD5; the SQLite catalog is opened read-only and PostgreSQL
    /// sessions are read-only. The store must exist already.
    public var readOnly: Bool
    /// Told of every statement the store runs on its catalog (tests count a request's); nil: none.
    public var catalogObserver: (any CatalogObserver)?
    public init(
      reserveBytes: Int64 = 4 << 20, backgroundMD5: Bool = true, catalog: CatalogLocation? = nil,
      blobs: BlobLocation? = nil, backends: StoreBackends = .embedded, logger: Logger = Logger(label: "larder.store"),
      catalogWriters: Int = 8, readOnly: Bool = false
    ) {
      self.init(
        faults: .none, reserveBytes: reserveBytes, backgroundMD5: backgroundMD5, catalog: catalog, blobs: blobs,
        backends: backends, logger: logger, catalogWriters: catalogWriters, readOnly: readOnly)
    }

    /// A configuration whose store calls `faults` at each ``FaultPoint`` (tests).
    package init(
      faults: FaultInjector, reserveBytes: Int64 = 4 << 20, backgroundMD5: Bool = true,
      catalog: CatalogLocation? = nil, blobs: BlobLocation? = nil, backends: StoreBackends = .embedded,
      logger: Logger = Logger(label: "larder.store"), catalogWriters: Int = 8, readOnly: Bool = false,
      catalogObserver: (any CatalogObserver)? = nil
    ) {
      self.catalogObserver = catalogObserver
      self.readOnly = readOnly
      self.logger = logger
      self.catalogWriters = catalogWriters
      self.faults = faults
      self.reserveBytes = reserveBytes
      self.backgroundMD5 = backgroundMD5
      self.catalog = catalog
      self.blobs = blobs
      self.backends = backends
    }
  }

  public let directory: URL
  package let catalog: Catalog
  /// Where this store's catalog is.
  public var catalogLocation: CatalogLocation { catalog.location }
  /// The data directory's working files: temp files, resumable uploads' staging files and the
  /// layout filesystem content keeps its files in (which only ``content`` touches).
  package let blobs: BlobStore
  /// Where resumable uploads keep their bytes so that any node can continue them (S3); nil
  /// keeps them in this node's data directory (one node).
  var sharedUploads: (any SharedUploadStorage)? { content as? any SharedUploadStorage }
  /// The one entry point to stored bytes: what the write path, reads, recovery, the collector,
  /// the verifier and backups act on, chosen once at open (``ContentStore``).
  package let content: any ContentStore
  public let files: FileStore
  public let objects: ObjectStore
  /// Object-change events: subscriptions, deliveries, the feed (``ObjectEvents``).
  public var events: ObjectEvents { ObjectEvents(catalog: catalog) }
  /// Files derived from other content (image variants), collected with their sources.
  public var derived: DerivedFiles {
    DerivedFiles(catalog: catalog, files: files, content: content, directory: directory)
  }
  /// Application models and the files attached to them.
  public let models: ModelStore
  /// What recovery found at open.
  public let recovery: RecoveryReport
  /// Where the store says what it could not do and left for later (``Configuration/logger``).
  public let logger: Logger
  private let removeOnDeinit: Bool

  /// Opens (creating if needed) the store in `directory` and recovers from any earlier crash.
  /// - Throws: ``LarderError`` or ``DatabaseError`` if the directory or catalog cannot be opened.
  public convenience init(at directory: URL, configuration: Configuration = .init()) throws {
    try self.init(at: directory, configuration: configuration, removeOnDeinit: false)
  }

  init(at directory: URL, configuration: Configuration, removeOnDeinit: Bool) throws {
    self.directory = directory.standardizedFileURL
    logger = configuration.logger
    self.removeOnDeinit = removeOnDeinit
    // With a shared catalog, writes of different contents link into blobs/ at the same time.
    let sharedCatalog = configuration.catalog.map { $0 != .dataDirectory } ?? false
    let readOnly = configuration.readOnly
    if readOnly, !FileManager.default.fileExists(atPath: self.directory.path) {
      throw LarderError.invalidArgument("no store in \(self.directory.path): a read-only open creates nothing")
    }
    blobs = try BlobStore(root: self.directory, concurrentWriters: sharedCatalog, create: !readOnly)
    let reserve = readOnly ? nil : SpaceReserve(directory: self.directory, bytes: configuration.reserveBytes)
    catalog = try Catalog(
      location: configuration.catalog ?? .dataDirectory,
      sqlitePath: self.directory.appendingPathComponent("larder.sqlite").path, backends: configuration.backends,
      reserve: reserve, writers: configuration.catalogWriters, readOnly: readOnly,
      observer: configuration.catalogObserver)
    reserve?.replenish()
    // The one place the storage mode is decided: the content store that the write path, reads,
    // recovery, gc and verify use (its protocol for each, ``ContentStore``).
    content = try Self.openContent(
      configuration.blobs ?? .dataDirectory, blobs: blobs, catalog: catalog, backends: configuration.backends)
    do {
      try StoreIdentity.check(
        catalog: catalog, content: content, catalogLocation: configuration.catalog ?? .dataDirectory,
        readOnly: readOnly)
    } catch LarderError.blobStoreUnavailable(let detail) {
      // A blob store that is down must not keep a node from starting (it answers 503 until the
      // store is back); the identity is checked at the next open that reaches it.
      configuration.logger.warning("the blob store's identity is not checked: it is unavailable (\(detail))")
    }
    files = FileStore(
      catalog: catalog, blobs: blobs, content: content, faults: configuration.faults,
      md5Backfill: configuration.backgroundMD5 && !readOnly
        ? MD5Backfill(catalog: catalog, content: content, rescanInterval: .seconds(10)) : nil)
    objects = ObjectStore(catalog: catalog, files: files)
    models = ModelStore(catalog: catalog)
    // Recovery removes and moves files: a read-only open leaves what it finds for gc to report.
    recovery =
      readOnly
      ? RecoveryReport() : try Recovery.run(blobs: blobs, content: content, catalog: catalog, logger: configuration.logger)
    files.md5Backfill?.wake()
  }

  /// A store in a new temporary directory, removed when the store is released (for tests).
  public static func temporary(configuration: Configuration = .init()) throws -> Larder {
    try temporary(at: newTemporaryDirectory(), configuration: configuration)
  }

  /// A store in `directory`, which the store removes when it is released (for tests that need
  /// to know the directory before the store opens).
  public static func temporary(at directory: URL, configuration: Configuration) throws -> Larder {
    try Larder(at: directory, configuration: configuration, removeOnDeinit: true)
  }

  /// A path in the temporary directory that nothing uses yet.
  public static func newTemporaryDirectory() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("larder-\(UUID().uuidString)")
  }

  /// Moves the catalog's write-ahead log into its database file and truncates it, so a stopped
  /// service leaves one self-contained `larder.sqlite`. Another process may still be reading.
  /// - Throws: ``DatabaseError`` (busy when another process holds a write).
  public func checkpoint() throws { try catalog.checkpoint() }

  /// How long this process's catalog writes waited for their locks and held them, since the
  /// store opened (`/metrics`: `larder_catalog_lock_*`).
  public func catalogLockTimes() -> CatalogLockTimes { catalog.lockTimes }

  /// The catalog schema version this Larder writes (the number of migrations it knows).
  public static var catalogSchemaVersion: Int { Migrations.all.count }

  /// Copies the SQLite catalog of the data directory `source` into the empty catalog at
  /// `destination`, checking every table's count; returns them. See ``CatalogCopy``.
  public static func copyCatalog(
    from source: URL, to destination: CatalogLocation, backends: StoreBackends
  ) throws -> [(String, Int64)] {
    try CatalogCopy.run(from: source, to: destination, backends: backends)
  }

  /// Saves and deletes models atomically: `try larder.write { tx in try tx.save(a); try tx.delete(b) }`.
  public func write<R>(_ body: (ModelTransaction) throws -> R) throws -> R { try models.write(body) }

  deinit {
    if removeOnDeinit {
      // Blob files are read-only; their directories are not, so removal works.
      try? FileManager.default.removeItem(at: directory)
    }
  }

  /// The content store of `location` over `catalog` (a restore opens its target's the same way).
  static func openContent(_ location: BlobLocation, blobs: BlobStore, catalog: Catalog, backends: StoreBackends)
    throws -> any ContentStore
  {
    switch location {
    case .dataDirectory:
      return LocalContentStore(blobs: blobs, catalog: catalog)
    case .s3(let url, let credentialsFile):
      guard let open = backends.s3 else {
        throw LarderError.invalidArgument(
          "blobs in S3 need the LarderS3Store module: open the store with backends: [.s3]")
      }
      do {
        return try open(url, credentialsFile, catalog)
      } catch let error as LarderError {
        throw error
      } catch {
        throw LarderError.invalidArgument("the blob store \(location): \(error)")
      }
    }
  }
}
