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
  public func record(_ file: File, source: String, params: String) throws -> File? {
    guard let digest = Hex.decode(source) else { return nil }
    let now = Date()
    let fileID = try catalog.write { db -> String? in
      // Checked under the write lock, as gc's release is: a source released a moment earlier
      // is seen here, and one released later sees this row.
      guard
        try db.row(
          """
          SELECT 1 AS held FROM files f WHERE f.blob_sha256 = ? \
          AND NOT EXISTS (SELECT 1 FROM derived_files x WHERE x.file_id = f.id) LIMIT 1
          """, [digest]) != nil
      else { return nil }
      try db.execute(
        """
        INSERT INTO derived_files(source_sha256, params, file_id, size, created_at, used_at) \
        VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
        """, [digest, params, file.id, file.size, now, now])
      return try db.row(
        "SELECT file_id FROM derived_files WHERE source_sha256 = ? AND params = ?", [digest, params])?.string(
          "file_id")
    }
    guard let fileID else { return nil }
    return fileID == file.id ? file : try files.file(id: fileID)
  }

  /// How many derived files there are, and their bytes.
  public func statistics() throws -> (count: Int, bytes: Int64) {
    try catalog.read { db in
      let row = try db.row("SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM derived_files")
      return (Int(row?.int("n") ?? 0), row?.int("bytes") ?? 0)
    }
  }

  /// Releases the least recently used derived files until their bytes fit in `budget`, in one
  /// statement (a running sum from the most recently used: what lies beyond the budget goes);
  /// their blobs go at the next collection (when no other file holds them). Returns how many went.
  @discardableResult
  public func evict(toFit budget: Int64) throws -> Int {
    try catalog.write { db in
      try db.execute(
        """
        DELETE FROM files WHERE id IN (SELECT file_id FROM (\
        SELECT file_id, sum(size) OVER (ORDER BY used_at DESC, created_at DESC, file_id) AS kept \
        FROM derived_files) ranked WHERE kept > ?)
        """, [budget])
      return db.changes
    }
  }

  /// Files of derivations whose source no other file holds: gc releases them with the source.
  static let orphaned = """
    SELECT d.file_id FROM derived_files d WHERE NOT EXISTS (\
    SELECT 1 FROM files s WHERE s.blob_sha256 = d.source_sha256 \
    AND NOT EXISTS (SELECT 1 FROM derived_files x WHERE x.file_id = s.id))
    """
}
