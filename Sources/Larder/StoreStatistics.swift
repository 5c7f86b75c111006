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

    public init(name: String, objectCount: Int) {
      self.name = name
      self.objectCount = objectCount
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
      // The primary key (bucket, name) makes this one pass over the objects index.
      let buckets = try db.rows("SELECT bucket, count(*) AS n FROM objects GROUP BY bucket ORDER BY bucket").map {
        StoreStatistics.Bucket(name: $0.string("bucket") ?? "", objectCount: Int($0.int("n") ?? 0))
      }
      let blobs = try db.row("SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM blobs")
      let files = try db.row("SELECT count(*) AS n FROM files")
      let uploads = try db.row("SELECT count(*) AS n FROM uploads WHERE completed_at IS NULL")
      return StoreStatistics(
        objectCount: buckets.reduce(0) { $0 + $1.objectCount }, buckets: buckets,
        fileCount: Int(files?.int("n") ?? 0), blobCount: Int(blobs?.int("n") ?? 0),
        blobBytes: blobs?.int("bytes") ?? 0, uploadsInProgress: Int(uploads?.int("n") ?? 0))
    }
  }
}
