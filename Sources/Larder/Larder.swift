import Foundation

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
    /// Test hook for failure and crash injection; by default only `LARDER_CRASH_AT` acts.
    public var faults: FaultInjector
    /// Bytes kept in `<data>/reserve` so deletes and gc can commit on a full disk; 0 keeps none.
    /// Created only while the disk has four times as much free.
    public var reserveBytes: Int64
    /// Whether this process hashes, in the background, the MD5 of content committed without one
    /// (``MD5Backfill``), starting with a pass at open over what earlier runs left, and rescanning
    /// every 10 s for what other processes left. Off, the
    /// blobs keep `md5` NULL until a process that has it on (or ``FileStore/withMD5(_:)``) fills it.
    public var backgroundMD5: Bool
    /// Where the catalog lives; nil: `larder.sqlite` in the data directory (or, as a test hook
    /// like `LARDER_CRASH_AT`, a schema of `LARDER_TEST_CATALOG`'s database: see
    /// ``CatalogLocation``).
    public var catalog: CatalogLocation?
    /// Where committed bytes live; nil: `blobs/` in the data directory (or, as a test hook, a
    /// prefix of `LARDER_TEST_BLOBS`'s bucket: see ``BlobLocation``). Temp files and the
    /// staging files of resumable uploads stay in the data directory either way (with S3, the
    /// bucket holds their bytes too: see ``UploadStore``).
    public var blobs: BlobLocation?
    public init(
      faults: FaultInjector = .fromEnvironment, reserveBytes: Int64 = 4 << 20, backgroundMD5: Bool = true,
      catalog: CatalogLocation? = nil, blobs: BlobLocation? = nil
    ) {
      self.faults = faults
      self.reserveBytes = reserveBytes
      self.backgroundMD5 = backgroundMD5
      self.catalog = catalog
      self.blobs = blobs
    }
  }

  public let directory: URL
  package let catalog: Catalog
  /// Where this store's catalog is.
  public var catalogLocation: CatalogLocation { catalog.location }
  /// The data directory's files: temp files, partial uploads and, in filesystem mode, the blobs.
  public let blobs: BlobStore
  /// Where committed bytes live (the data directory's `blobs/`, or S3).
  public let blobBackend: any BlobBackend
  /// Where this store's blobs are, as configured.
  public let blobLocation: BlobLocation
  /// Where resumable uploads keep their bytes so that any node can continue them (S3); nil
  /// keeps them in this node's data directory (the filesystem backend: one node).
  var sharedUploads: (any SharedUploadStorage)? { blobBackend as? any SharedUploadStorage }
  public let files: FileStore
  public let objects: ObjectStore
  /// Application models and the files attached to them.
  public let models: ModelStore
  /// What recovery found at open.
  public let recovery: RecoveryReport
  private let removeOnDeinit: Bool

  /// Opens (creating if needed) the store in `directory` and recovers from any earlier crash.
  /// - Throws: ``LarderError`` or ``DatabaseError`` if the directory or catalog cannot be opened.
  public convenience init(at directory: URL, configuration: Configuration = .init()) throws {
    try self.init(at: directory, configuration: configuration, removeOnDeinit: false)
  }

  init(at directory: URL, configuration: Configuration, removeOnDeinit: Bool) throws {
    self.directory = directory.standardizedFileURL
    self.removeOnDeinit = removeOnDeinit
    blobs = try BlobStore(root: self.directory)
    blobLocation = configuration.blobs ?? BlobLocation.defaultLocation(for: self.directory)
    switch blobLocation {
    case .dataDirectory: blobBackend = FilesystemBlobBackend(store: blobs)
    case .s3(let url, let credentialsFile):
      do {
        blobBackend = try S3BlobBackend(url: url, credentialsFile: credentialsFile)
      } catch let error as LarderError {
        throw error
      } catch {
        throw LarderError.invalidArgument("--blobs: \(error)")
      }
    }
    let reserve = SpaceReserve(directory: self.directory, bytes: configuration.reserveBytes)
    catalog = try Catalog(
      location: configuration.catalog ?? CatalogLocation.defaultLocation(for: self.directory),
      sqlitePath: self.directory.appendingPathComponent("larder.sqlite").path, reserve: reserve)
    reserve.replenish()
    files = FileStore(
      catalog: catalog, blobs: blobs, backend: blobBackend, faults: configuration.faults,
      md5Backfill: configuration.backgroundMD5
        ? MD5Backfill(catalog: catalog, blobs: blobs, backend: blobBackend, rescanInterval: .seconds(10)) : nil)
    objects = ObjectStore(catalog: catalog, files: files)
    models = ModelStore(catalog: catalog)
    recovery = try Recovery.run(blobs: blobs, catalog: catalog)
    files.md5Backfill?.wake()
  }

  /// A store in a new temporary directory, removed when the store is released (for tests).
  public static func temporary(configuration: Configuration = .init()) throws -> Larder {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("larder-\(UUID().uuidString)")
    return try Larder(at: dir, configuration: configuration, removeOnDeinit: true)
  }

  /// Moves the catalog's write-ahead log into its database file and truncates it, so a stopped
  /// service leaves one self-contained `larder.sqlite`. Another process may still be reading.
  /// - Throws: ``DatabaseError`` (busy when another process holds a write).
  public func checkpoint() throws { try catalog.checkpoint() }

  /// The catalog schema version this Larder writes (the number of migrations it knows).
  public static var catalogSchemaVersion: Int { Migrations.all.count }

  /// Copies the SQLite catalog of the data directory `source` into the empty catalog at
  /// `destination`, checking every table's count; returns them. See ``CatalogCopy``.
  public static func copyCatalog(from source: URL, to destination: CatalogLocation) throws -> [(String, Int64)] {
    try CatalogCopy.run(from: source, to: destination)
  }

  /// Saves and deletes models atomically: `try larder.write { tx in try tx.save(a); try tx.delete(b) }`.
  public func write<R>(_ body: (ModelTransaction) throws -> R) throws -> R { try models.write(body) }

  deinit {
    if removeOnDeinit {
      // Blob files are read-only; their directories are not, so removal works.
      try? FileManager.default.removeItem(at: directory)
    }
  }
}
