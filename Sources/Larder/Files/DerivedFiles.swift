import Foundation
import LarderCrypto

/// Files derived from other content (image variants), keyed by the source's SHA-256 and the
/// canonical parameters of the derivation, so identical sources share their derivations.
///
/// ```swift
/// if let cached = try larder.derived.find(source: file.sha256, params: "v1;w=64;…") { return cached }
/// let variant = try larder.files.put(Data(bytes), declaredContentType: "image/webp")
/// let kept = try larder.derived.record(variant, source: file.sha256, params: "v1;w=64;…")
/// ```
/// A derived file is kept while any file holds its source blob and goes with it: the garbage
/// collector releases the derivations of sources no file holds (``GarbageCollector``), in the
/// same run that releases the source. The store knows nothing of what a derivation is.
public struct DerivedFiles: Sendable {
  let catalog: Catalog
  let files: FileStore
  let content: any ContentStore
  let directory: URL

  /// What is kept: the derived files' bytes at most, and the files derived from one source at
  /// most; nil is no bound. The least recently used go first.
  public struct Budget: Sendable, Equatable {
    public var bytes: Int64?
    public var perSource: Int?
    public init(bytes: Int64? = nil, perSource: Int? = nil) {
      self.bytes = bytes
      self.perSource = perSource
    }
    public static let unbounded = Budget()
  }

  /// A use moves `used_at` (the LRU order) at most this often, so cached reads stay reads. A
  /// caller remembering what ``find(source:params:)`` found finds it again at this interval.
  public static let touchInterval: TimeInterval = 60

  /// The file derived from `source` by `params`, or nil; marks it used.
  public func find(source: String, params: String) throws -> File? {
    guard let digest = Hex.decode(source) else { return nil }
    let row = try catalog.read { db in
      try db.row(
        """
        SELECT \(File.columns), d.used_at AS used_at FROM derived_files d JOIN files f ON f.id = d.file_id \
        WHERE d.source_sha256 = ? AND d.params = ?
        """, [digest, params])
    }
    guard let row else { return nil }
    let now = Date()
    if let used = row.date("used_at"), now.timeIntervalSince(used) > Self.touchInterval {
      // Best effort: a busy catalog only delays the LRU order.
      _ = try? catalog.write { db in
        try db.execute(
          "UPDATE derived_files SET used_at = ? WHERE source_sha256 = ? AND params = ?",
          [now, digest, params])
      }
    }
    return File(row: row)
  }

  /// Records `file` as derived from `source` by `params`, and returns the file recorded: an
  /// earlier one when another render recorded first, nil when no file holds the source any more
  /// (its derivation is not kept; `file` is left to gc as any unreferenced file).
  ///
  /// `budget` is applied in the same write transaction, so no commit leaves more than it allows:
  /// past `perSource` the source's least recently used derivations go, past `bytes` the least
  /// recently used of all; never the one just recorded (a caller keeps none larger than
  /// `bytes`). What goes is released as ``evict(toFit:)`` releases it.
  public func record(_ file: File, source: String, params: String, budget: Budget = .unbounded) throws
    -> File?
  {
    guard let digest = Hex.decode(source) else { return nil }
    let now = Date()
    let (fileID, released) = try catalog.write { db -> (String?, [[UInt8]]) in
      // Checked under the write lock, as gc's release is: a source released a moment earlier
      // is seen here, and one released later sees this row.
      guard
        try db.row(
          """
          SELECT 1 AS held FROM files f WHERE f.blob_sha256 = ? \
          AND NOT EXISTS (SELECT 1 FROM derived_files x WHERE x.file_id = f.id) LIMIT 1
          """, [digest]) != nil
      else { return (nil, []) }
      try db.execute(
        """
        INSERT INTO derived_files(source_sha256, params, file_id, size, created_at, used_at) \
        VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
        """, [digest, params, file.id, file.size, now, now])
      let recorded = try db.row(
        "SELECT file_id FROM derived_files WHERE source_sha256 = ? AND params = ?", [digest, params])?.string(
          "file_id")
      var released: [[UInt8]] = []
      if let perSource = budget.perSource {
        released += try Self.release(
          """
          SELECT file_id FROM (SELECT file_id, row_number() OVER (ORDER BY \(Self.newestFirst)) AS n \
          FROM derived_files WHERE source_sha256 = ?) ranked WHERE n > ?
          """, [recorded ?? "", digest, perSource], in: db
        ).digests
      }
      if let bytes = budget.bytes {
        released += try Self.release(Self.beyondBudget, [recorded ?? "", bytes], in: db).digests
      }
      return (recorded, released)
    }
    removeReleased(released)
    guard let fileID else { return nil }
    return fileID == file.id ? file : try files.file(id: fileID)
  }

  /// The LRU order, most recent first, with the file `?` (the one just recorded) before all.
  static let newestFirst = "(file_id = ?) DESC, used_at DESC, created_at DESC, file_id"

  /// Derived files past a budget of bytes (`?` kept first, `?` the budget): a running sum in
  /// the LRU order, most recent first; what lies beyond the budget goes.
  static let beyondBudget = """
    SELECT file_id FROM (SELECT file_id, sum(size) OVER (ORDER BY \(newestFirst)) AS kept \
    FROM derived_files) ranked WHERE kept > ?
    """

  /// Releases the derivations `select` names: their rows go, and their files unless an object
  /// or attachment holds one (a variant attached to a model stays that model's file). Returns
  /// how many derivations went, and the digests of the files deleted (their blobs may now be
  /// unreferenced).
  private static func release(_ select: String, _ values: [any SQLBindable], in db: Database) throws
    -> (count: Int, digests: [[UInt8]])
  {
    let ids = try db.rows(select, values).compactMap { $0.string("file_id") }
    guard !ids.isEmpty else { return (0, []) }
    let list = Array(repeating: "?", count: ids.count).joined(separator: ", ")
    try db.execute("DELETE FROM derived_files WHERE file_id IN (\(list))", ids)
    let digests = try db.rows(
      """
      DELETE FROM files WHERE id IN (\(list)) \
      AND NOT EXISTS (SELECT 1 FROM objects o WHERE o.file_id = files.id) \
      AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.file_id = files.id) RETURNING blob_sha256
      """, ids
    ).compactMap { $0.bytes("blob_sha256") }
    return (ids.count, digests)
  }

  /// Removes the blobs of released derivations now, when no other file holds them, rather than
  /// at the next collection: a budget that counted them out must not leave their bytes on disk
  /// for a day. The removal is gc's own (rechecked under the write lock), under the collector's
  /// lock; while a collector runs, that collector (or the next) removes them. Best effort: what
  /// fails here is an orphan blob, which gc removes.
  private func removeReleased(_ digests: [[UInt8]]) {
    guard !digests.isEmpty else { return }
    guard let lock = try? CollectorLock.acquire(in: directory, catalog: catalog) else { return }
    defer { lock.release() }
    _ = try? content.removeUnreferenced(digests, faults: files.faults)
  }

  /// How many derived files there are, and their bytes.
  public func statistics() throws -> (count: Int, bytes: Int64) {
    try catalog.read { db in
      let row = try db.row("SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM derived_files")
      return (Int(row?.int("n") ?? 0), row?.int("bytes") ?? 0)
    }
  }

  /// Releases the least recently used derived files until their bytes fit in `budget`, and
  /// removes their blobs when no other file holds them. Returns how many went.
  @discardableResult
  public func evict(toFit budget: Int64) throws -> Int {
    let released = try catalog.write { db in try Self.release(Self.beyondBudget, ["", budget], in: db) }
    removeReleased(released.digests)
    return released.count
  }

  /// Files of derivations whose source no other file holds: gc releases them with the source.
  static let orphaned = """
    SELECT d.file_id FROM derived_files d WHERE NOT EXISTS (\
    SELECT 1 FROM files s WHERE s.blob_sha256 = d.source_sha256 \
    AND NOT EXISTS (SELECT 1 FROM derived_files x WHERE x.file_id = s.id))
    """
}
