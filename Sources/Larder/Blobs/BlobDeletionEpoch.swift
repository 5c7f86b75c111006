import LarderCrypto

/// The catalog's record of blob deletions in a remote blob store, which lets a writer that
/// uploaded content *before* its write transaction know whether a collector may have deleted
/// that address since (ARCHITECTURE §11, "The PUT/DELETE race").
///
/// One `settings` row, `blob_deletion_epoch`, an integer that only grows. A collector makes it
/// odd in a transaction of its own before it deletes anything, then, in one write transaction,
/// deletes the rows, DELETEs their objects and makes it even again: so every DELETE of an
/// object happens under the catalog's write lock, between an odd and the following even value.
/// A writer reads the epoch before its PUT; inside its write transaction it checks the bytes
/// are really there (a HEAD, and a PUT again when they are not) only when the epoch moved since
/// or is odd (a collector died mid-way). On the common path that is no extra round trip.
enum BlobDeletionEpoch {
  static let key = "blob_deletion_epoch"

  /// The current epoch: 0 when no collector ever deleted a remote blob.
  static func read(_ db: Database) throws -> Int64 {
    guard let bytes = try db.row("SELECT value FROM settings WHERE key = ?", [key])?.bytes("value"),
      bytes.count == 8
    else { return 0 }
    return bytes.reduce(Int64(0)) { $0 << 8 | Int64($1) }
  }

  /// Moves the epoch to the next odd (`deleting`) or even (`!deleting`) value; returns it.
  @discardableResult
  static func advance(_ db: Database, deleting: Bool) throws -> Int64 {
    let current = try read(db)
    let next = current + ((current % 2 == 1) == deleting ? 2 : 1)
    let bytes = (0..<8).map { UInt8(truncatingIfNeeded: next >> (8 * (7 - $0))) }
    try db.execute(
      "INSERT INTO settings(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
      [key, bytes])
    return next
  }

  /// Whether bytes uploaded after reading `before` may have been deleted by the time `now` is read.
  static func mayHaveDeleted(since before: Int64, now: Int64) -> Bool {
    now != before || now % 2 == 1
  }
}

extension BlobDeletionEpoch {
  /// Deletes from `backend` the blobs of `candidates` that no row claims, rechecked under the
  /// write lock between two epoch moves (gc's and verify's strays in S3). Returns how many it
  /// deleted and their bytes.
  static func deleteUnclaimed(
    _ candidates: [(hex: String, size: Int64)], catalog: Catalog, backend: any BlobBackend
  ) throws -> (count: Int, bytes: Int64) {
    guard !candidates.isEmpty else { return (0, 0) }
    try catalog.write { db in try advance(db, deleting: true) }
    return try catalog.write { db in
      var count = 0
      var bytes: Int64 = 0
      for candidate in candidates
      where try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [Hex.decode(candidate.hex) ?? []]) == nil {
        try backend.remove(blob: candidate.hex)
        count += 1
        bytes += candidate.size
      }
      try advance(db, deleting: false)
      return (count, bytes)
    }
  }

  /// The candidates no row claims now (read on a snapshot; recheck under the lock before acting).
  static func unclaimed(_ candidates: [(hex: String, size: Int64)], catalog: Catalog) throws -> [(
    hex: String, size: Int64
  )] {
    try catalog.read { db in
      try candidates.filter {
        try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [Hex.decode($0.hex) ?? []]) == nil
      }
    }
  }
}
