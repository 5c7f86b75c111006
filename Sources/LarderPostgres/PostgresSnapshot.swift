import Foundation
import Larder

/// A backup's view of a PostgreSQL catalog (issue 35): the snapshot is one REPEATABLE READ
/// read-only transaction, copied table by table into an SQLite snapshot file.
extension PostgresCatalogEngine {
  /// The collector's deleting statement reads `snapshot_pins` (ACCESS SHARE, held to its
  /// commit); this waits for every such transaction to end, so none that missed the pin
  /// commits after the backup's snapshot is taken. Later statements see the pin (READ COMMITTED
  /// takes a fresh snapshot per statement). Reads of the pins wait a moment, nothing else does.
  func holdOffCollectors(_ writer: any Database) throws {
    try writer.execute("LOCK TABLE snapshot_pins IN ACCESS EXCLUSIVE MODE")
  }

  func writeSnapshot(_ db: any Database, to path: String) throws {
    try db.transaction(immediate: false) { db in
      let version = Int(try db.row("SELECT max(version) AS v FROM larder_schema")?.int("v") ?? 0)
      // A sequence is outside the snapshot; read inside it, it is at least what any row holds.
      let issued = try db.row("SELECT last_value AS f FROM blob_fence_counter")?.int("f") ?? 0
      try CatalogSnapshotFile.write(from: db, version: version, issuedFences: issued, to: path)
    }
  }
}
