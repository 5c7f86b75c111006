import Foundation

/// Counts over a whole store, read from one catalog snapshot.
///
/// This is what a monitoring endpoint or `larder ls` needs from the catalog, as values: callers
/// never write SQL against the store's tables, so the schema stays free to change.
/// ```swift
/// let stats = try larder.statistics()
/// print("\(stats.objectCount) objects, \(stats.blobBytes) bytes of distinct content")
/// ```
public struct StoreStatistics: Sendable, Equatable, Codable {
  /// One bucket and how many objects it holds.
  public struct Bucket: Sendable, Equatable, Codable {
    public var name: String
    public var objectCount: Int
    /// Sum of its objects' sizes (each counted, however many share a content).
    public var logicalBytes: Int64

    public init(name: String, objectCount: Int, logicalBytes: Int64 = 0) {
      self.name = name
      self.objectCount = objectCount
      self.logicalBytes = logicalBytes
    }
  }

  /// Objects in all buckets.
  public var objectCount: Int
  /// Buckets that hold at least one object, by name (a bucket exists only through its objects).
  public var buckets: [Bucket]
  /// `File`s: committed contents, shared by objects and model attachments or not yet released.
  public var fileCount: Int
  /// Distinct contents stored (deduplicated by SHA-256).
  public var blobCount: Int
  /// Bytes of distinct content: what the blobs occupy, each counted once however many files share it.
  public var blobBytes: Int64
  /// Resumable uploads not yet completed (their bytes live in `uploads/`, not in blobs).
  public var uploadsInProgress: Int
  /// Bytes those uploads have received so far.
  public var uploadBytesReceived: Int64 = 0
  /// Sum of the objects' sizes: what the store would hold without deduplication (each object
  /// counted, however many share a content). `logicalBytes - blobBytes` can go negative only
  /// when blobs outlive their objects (collectable, or held by attachments and variants).
  public var logicalBytes: Int64 = 0
  /// Blobs no object, attachment or variant references any more, and their bytes: what `larder gc`
  /// frees once their files are older than its grace period (24 h by default).
  public var collectableBlobCount = 0
  public var collectableBlobBytes: Int64 = 0
  /// The last collection that changed the store's catalog (`larder gc` without `--dry-run`).
  public var lastCollection: CollectionRecord?

  /// When a collection finished and what it freed.
  public struct CollectionRecord: Sendable, Equatable, Codable {
    public var finishedAt: Date
    public var blobsRemoved: Int
    public var bytesFreed: Int64
  }

  public init(
    objectCount: Int = 0, buckets: [Bucket] = [], fileCount: Int = 0, blobCount: Int = 0, blobBytes: Int64 = 0,
    uploadsInProgress: Int = 0
  ) {
    self.objectCount = objectCount
    self.buckets = buckets
    self.fileCount = fileCount
    self.blobCount = blobCount
    self.blobBytes = blobBytes
    self.uploadsInProgress = uploadsInProgress
  }
}

extension Larder {
  /// Counts objects, buckets, files, blobs and uploads in one read snapshot (so they agree with
  /// each other). Each count scans its table or index: meant for a scrape every few seconds, not
  /// for every request.
  /// - Throws: ``DatabaseError`` when the catalog cannot be read.
  public func statistics() throws -> StoreStatistics {
    try catalog.read { db in
      // One pass over the objects, joined to their files for the sizes; the totals are their sums.
      let buckets = try db.rows(
        """
        SELECT o.bucket AS bucket, count(*) AS n, coalesce(sum(f.size), 0) AS bytes
        FROM objects o JOIN files f ON f.id = o.file_id GROUP BY o.bucket ORDER BY o.bucket
        """
      ).map {
        StoreStatistics.Bucket(
          name: $0.string("bucket") ?? "", objectCount: Int($0.int("n") ?? 0), logicalBytes: $0.int("bytes") ?? 0)
      }
      let blobs = try db.row("SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM blobs")
      let files = try db.row("SELECT count(*) AS n FROM files")
      let uploads = try CatalogUploadTable.unfinished(db)
      // gc's own test for an orphan blob, with every unreferenced file counted whatever its age.
      let collectable = try db.row(
        "SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM blobs b WHERE \(GarbageCollector.orphanBlobs)",
        [Date.distantFuture, Date.distantFuture])
      var statistics = StoreStatistics(
        objectCount: buckets.reduce(0) { $0 + $1.objectCount }, buckets: buckets,
        fileCount: Int(files?.int("n") ?? 0), blobCount: Int(blobs?.int("n") ?? 0),
        blobBytes: blobs?.int("bytes") ?? 0, uploadsInProgress: uploads.count)
      statistics.uploadBytesReceived = uploads.bytes
      statistics.logicalBytes = buckets.reduce(0) { $0 + $1.logicalBytes }
      statistics.collectableBlobCount = Int(collectable?.int("n") ?? 0)
      statistics.collectableBlobBytes = collectable?.int("bytes") ?? 0
      statistics.lastCollection = try db.row("SELECT value FROM settings WHERE key = 'last_gc'")?.bytes("value")
        .flatMap { try? JSONDecoder().decode(StoreStatistics.CollectionRecord.self, from: Data($0)) }
      return statistics
    }
  }

  /// Records a finished collection (`settings.last_gc`), which ``statistics()`` reports.
  /// - Throws: ``DatabaseError`` when the catalog cannot be written.
  func recordCollection(_ report: GCReport, at time: Date = Date()) throws {
    let record = StoreStatistics.CollectionRecord(
      finishedAt: time, blobsRemoved: report.blobsRemoved, bytesFreed: report.bytesFreed)
    let value = Array(try JSONEncoder().encode(record))
    try catalog.write { db in
      try db.execute("DELETE FROM settings WHERE key = 'last_gc'")
      try db.execute("INSERT INTO settings(key, value) VALUES ('last_gc', ?)", [value])
    }
  }
}
