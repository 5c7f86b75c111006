import Foundation

/// A backup's lease on the catalog snapshot it copies (issue 35; containerd's leases).
///
/// While any pin has not expired the collector deletes no blob row: the check is in its
/// deleting statement (``UnreferencedBlobs``). That is coarser than pinning the snapshot's own
/// blob set, and chosen on purpose: it needs no copy of the set in the catalog (a large store's
/// snapshot references millions of blobs), the check is one indexed probe inside a transaction
/// the collector runs anyway, and it is correct by ordering alone — the pin commits before the
/// snapshot is taken, after every deleting transaction that could have missed it has ended
/// (SQLite: under the one write lock; PostgreSQL: ``CatalogEngine/holdOffCollectors(_:)``),
/// so a deletion is either before the pin (and absent from the snapshot) or sees the pin. The cost is that a collection during a backup frees no
/// blobs (files, uploads and strays still go); the next one after the backup does.
///
/// A pin lives `lease` and is renewed while the copy goes on; a killed backup's pin lapses by
/// itself, so a crash never stops collection for longer than one lease.
package struct SnapshotPins: Sendable {
  package static let lease: TimeInterval = 600
  let catalog: Catalog

  package init(catalog: Catalog) { self.catalog = catalog }

  /// Pins `id` until now + lease.
  package func pin(_ id: String) throws {
    let now = Date()
    try catalog.write { db in
      try catalog.engine.holdOffCollectors(db)
      try db.execute(
        "INSERT INTO snapshot_pins(id, created_at, expires_at) VALUES (?, ?, ?)",
        [id, now, now.addingTimeInterval(Self.lease)])
    }
  }

  /// Extends a live pin by one lease.
  /// - Throws: ``BackupError/pinLapsed(snapshot:)`` when it expired meanwhile (or is gone).
  package func renew(_ id: String) throws {
    let now = Date()
    let renewed = try catalog.write { db in
      try db.execute(
        "UPDATE snapshot_pins SET expires_at = ? WHERE id = ? AND expires_at > ?",
        [now.addingTimeInterval(Self.lease), id, now])
      return db.changes
    }
    guard renewed == 1 else { throw BackupError.pinLapsed(snapshot: id) }
  }

  /// Removes `id`'s pin, and any that lapsed.
  package func release(_ id: String) throws {
    try catalog.write { db in
      try db.execute("DELETE FROM snapshot_pins WHERE id = ? OR expires_at <= ?", [id, Date()])
    }
  }

  /// Pins that have not expired.
  package func live() throws -> [String] {
    try catalog.read { db in
      try db.rows("SELECT id FROM snapshot_pins WHERE expires_at > ? ORDER BY id", [Date()]).compactMap {
        $0.string("id")
      }
    }
  }
}
