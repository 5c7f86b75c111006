import Foundation

/// What an upload's data store keeps in its row between commits (the `shared_state` column):
/// opaque to ``UploadStore``, which stores what ``UploadDataStore/commit(_:committed:to:sha256:finishing:)``
/// returns and hands it back with the row. Nothing for bytes on one node's disk; the S3 parts,
/// pieces and SHA-256 state for bytes any node continues (``SharedUploadData``).
package struct UploadDataState: Sendable, Equatable {
  /// As stored; nil: nothing recorded.
  package let stored: String?
  package init(stored: String?) { self.stored = stored }
  package static let none = UploadDataState(stored: nil)
}

/// How a statement on an upload's row is guarded by its lease (``UploadLocker/hold(_:)``).
package enum UploadLeaseHold: Sendable, Equatable {
  /// The in-process slot is the only lock: nothing to check in the row.
  case slot
  /// This process's catalog lease: the row must still name it.
  case lease(HeldLease)
  /// A catalog lease this process does not hold (lost, or never taken): nothing may change.
  case lost
}

/// Every statement on the `uploads` table, in one place (tusd keeps an upload's info beside its
/// data; Larder keeps it in the catalog). ``UploadStore``, its locker and the collector speak to
/// the table only through this, so what a request costs in row reads is countable: tests wrap
/// it (``UploadStore/init(larder:expiry:maxIdleSessions:checkpoints:lease:clock:storage:table:beforeRenewal:)``).
/// Expiries and leases are written and judged on the catalog's clock
/// (``SQLDialect/nowMilliseconds``), never a node's.
package protocol UploadTable: Sendable {
  /// Inserts a new upload's row (a final concatenation born leased when `lease` is given);
  /// returns the expiry the catalog recorded, `expiry` from its now.
  func insert(_ upload: Upload, expiry: Duration, lease: (held: HeldLease, duration: Duration)?) throws -> Date?
  /// The row of `id` and whether it expired by the catalog's clock; nil when there is none.
  func row(_ id: String) throws -> (upload: Upload, expired: Bool)?
  /// Whether a row exists: why a guarded statement changed nothing (locked or gone).
  func exists(_ id: String) throws -> Bool
  /// Moves the offset from `from` to `to` (and the length, and the data store's `state`),
  /// extends the expiry and, under a catalog lease, the lease; nil when nothing matched (the
  /// offset moved, the row is completed or gone, or the lease is not this holder's).
  func commitOffset(
    _ id: String, from: Int64, to: Int64, length: Int64?, state: UploadDataState, expiry: Duration, lease: Duration,
    hold: UploadLeaseHold
  ) throws -> Date?
  /// Records the data store's `state` alone, under `hold`; false when nothing matched.
  func record(_ id: String, state: UploadDataState, hold: UploadLeaseHold) throws -> Bool
  /// Inside a publish's transaction: the row says completed at `upload.offset`. `from` is the
  /// offset it must still have (nil: a final concatenation, whose offset is 0 until now).
  /// - Throws: ``UploadError/locked(id:)`` when a catalog lease is no longer this holder's,
  ///   ``UploadError/notFound(id:)`` when the row is gone or moved.
  func complete(_ db: any Database, _ upload: Upload, from: Int64?, hold: UploadLeaseHold) throws
  /// Deletes the row of `id` if `owner` owns it and no lease of another process runs on it;
  /// returns the data store's state it held, nil when nothing matched.
  func terminate(_ id: String, owner: String?) throws -> UploadDataState?
  /// Deletes the row of `id`: any (`hold` nil), one not completed (`unfinishedOnly`), or one
  /// still held as `hold` says.
  func delete(_ id: String, unfinishedOnly: Bool, hold: UploadLeaseHold?) throws
  /// Takes `id`'s catalog lease as `held` for `duration` if it is free by the catalog's clock
  /// and the row is still as `expected` was read (offset, length, state, not completed); moves
  /// the epoch when it takes over a lease that was not given back. Returns the epoch, nil when
  /// nothing matched.
  func claim(_ id: String, token: String, duration: Duration, expected: Upload) throws -> Int64?
  /// Extends `held`; false when it is no longer this holder's.
  func renew(_ id: String, held: HeldLease, duration: Duration) throws -> Bool
  /// Gives `held` back (moving the epoch when `dirty`).
  func release(_ id: String, held: HeldLease) throws
  /// Whether a lease runs on `id` by the catalog's clock.
  func isLeased(_ id: String) throws -> Bool
  /// Which of `ids` are recorded, not completed and not expired by `now`.
  func inProgress(among ids: [String], now: Date) throws -> Set<String>
  /// The collector's first phase: the rows expired by the catalog's clock, deleted unless
  /// `dryRun`, with the data store's state each held.
  func expire(dryRun: Bool) throws -> [(id: String, state: UploadDataState)]
  /// Every upload id recorded (the collector's leftover pass).
  func allIDs() throws -> Set<String>
}

/// ``UploadTable`` over the store's catalog (SQLite or PostgreSQL).
package struct CatalogUploadTable: UploadTable {
  let catalog: Catalog

  package init(catalog: Catalog) { self.catalog = catalog }

  /// The SQL of an expiry or a lease's end: the catalog's now plus a duration bound as `?`.
  private static func fromNow(_ db: any Database) -> String { "\(db.dialect.nowMilliseconds) + ?" }

  /// The condition, and its arguments, that `hold` still holds the row.
  private static func holding(_ hold: UploadLeaseHold) -> (sql: String, arguments: [any SQLBindable]) {
    switch hold {
    case .slot: ("1 = 1", [])
    case .lease(let held): ("lease_holder = ? AND lease_epoch = ?", [held.token, held.epoch])
    case .lost: ("1 = 0", [])
    }
  }

  package func insert(_ upload: Upload, expiry: Duration, lease: (held: HeldLease, duration: Duration)?) throws
    -> Date?
  {
    try catalog.write { db in
      try db.row(
        """
        INSERT INTO uploads(
          id, bucket, name, owner, length, "offset", metadata, concat, expires_at, created_at, lease_holder, lease_until)
        VALUES (?, ?, ?, ?, ?, 0, ?, ?, \(Self.fromNow(db)), ?, ?, \(lease == nil ? "?" : Self.fromNow(db)))
        RETURNING expires_at
        """,
        [
          upload.id, upload.bucket, upload.name, upload.owner, upload.length, try ObjectStore.json(upload.metadata),
          upload.receivedConcat ?? upload.concat?.stored, expiry.milliseconds, upload.createdAt,
          lease?.held.token, lease?.duration.milliseconds,
        ])?.date("expires_at")
    }
  }

  package func row(_ id: String) throws -> (upload: Upload, expired: Bool)? {
    let row = try catalog.read(snapshot: false) { db in
      try db.row(
        """
        SELECT *, CASE WHEN expires_at < \(db.dialect.nowMilliseconds) THEN 1 ELSE 0 END AS expired_now
        FROM uploads WHERE id = ?
        """, [id])
    }
    return row.map { (Upload(row: $0), $0.int("expired_now") == 1) }
  }

  package func exists(_ id: String) throws -> Bool {
    try catalog.read(snapshot: false) { db in try db.row("SELECT 1 FROM uploads WHERE id = ?", [id]) != nil }
  }

  /// A lease this holder holds is renewed with the commit; a row without one keeps none.
  package func commitOffset(
    _ id: String, from: Int64, to: Int64, length: Int64?, state: UploadDataState, expiry: Duration, lease: Duration,
    hold: UploadLeaseHold
  ) throws -> Date? {
    let held = Self.holding(hold)
    return try catalog.write { db in
      try db.rows(
        """
        UPDATE uploads SET "offset" = ?, length = ?, expires_at = \(Self.fromNow(db)), shared_state = ?,
          lease_until = CASE WHEN lease_holder IS NULL THEN NULL ELSE \(Self.fromNow(db)) END
        WHERE id = ? AND "offset" = ? AND completed_at IS NULL AND \(held.sql) RETURNING expires_at
        """,
        [to, length, expiry.milliseconds, state.stored, lease.milliseconds, id, from] + held.arguments
      ).first?.date("expires_at")
    }
  }

  package func record(_ id: String, state: UploadDataState, hold: UploadLeaseHold) throws -> Bool {
    let held = Self.holding(hold)
    return try catalog.write { db in
      try db.execute(
        "UPDATE uploads SET shared_state = ? WHERE id = ? AND \(held.sql)", [state.stored, id] + held.arguments)
      return db.changes == 1
    }
  }

  package func complete(_ db: any Database, _ upload: Upload, from: Int64?, hold: UploadLeaseHold) throws {
    guard let from else {
      try db.execute(
        #"UPDATE uploads SET "offset" = ?, completed_at = ? WHERE id = ? AND completed_at IS NULL"#,
        [upload.offset, upload.completedAt, upload.id])
      guard db.changes == 1 else { throw UploadError.notFound(id: upload.id) }
      return
    }
    let held = Self.holding(hold)
    try db.execute(
      """
      UPDATE uploads SET "offset" = ?, length = ?, completed_at = ?
      WHERE id = ? AND "offset" = ? AND completed_at IS NULL AND \(held.sql)
      """,
      [upload.offset, upload.length, upload.completedAt, upload.id, from] + held.arguments)
    guard db.changes == 1 else {
      let leased = if case .slot = hold { false } else { true }
      let exists = try leased && db.row("SELECT 1 FROM uploads WHERE id = ?", [upload.id]) != nil
      throw exists ? UploadError.locked(id: upload.id) : UploadError.notFound(id: upload.id)
    }
  }

  /// A lease that ran out by the catalog's clock no longer protects the row.
  package func terminate(_ id: String, owner: String?) throws -> UploadDataState? {
    try catalog.write { db in
      try db.rows(
        """
        DELETE FROM uploads WHERE id = ? AND owner IS NOT DISTINCT FROM ?
          AND (lease_until IS NULL OR lease_until < \(db.dialect.nowMilliseconds)) RETURNING shared_state
        """, [id, owner]
      ).first.map { UploadDataState(stored: $0.string("shared_state")) }
    }
  }

  package func delete(_ id: String, unfinishedOnly: Bool, hold: UploadLeaseHold?) throws {
    let held = hold.map(Self.holding) ?? (sql: "1 = 1", arguments: [])
    try catalog.write { db in
      try db.execute(
        "DELETE FROM uploads WHERE id = ?\(unfinishedOnly ? " AND completed_at IS NULL" : "") AND \(held.sql)",
        [id] + held.arguments)
    }
  }

  package func claim(_ id: String, token: String, duration: Duration, expected: Upload) throws -> Int64? {
    try catalog.write { db in
      let now = db.dialect.nowMilliseconds
      return try db.rows(
        """
        UPDATE uploads SET lease_holder = ?, lease_until = \(now) + ?,
          lease_epoch = lease_epoch + CASE WHEN lease_holder IS NULL THEN 0 ELSE 1 END
        WHERE id = ? AND (lease_until IS NULL OR lease_until < \(now)) AND completed_at IS NULL AND "offset" = ?
          AND length IS NOT DISTINCT FROM ? AND shared_state IS NOT DISTINCT FROM ?
        RETURNING lease_epoch
        """, [token, duration.milliseconds, id, expected.offset, expected.length, expected.dataState.stored]
      ).first.map { $0.int("lease_epoch") ?? 0 }
    }
  }

  package func renew(_ id: String, held: HeldLease, duration: Duration) throws -> Bool {
    try catalog.write { db in
      try db.execute(
        """
        UPDATE uploads SET lease_until = \(db.dialect.nowMilliseconds) + ?
        WHERE id = ? AND lease_holder = ? AND lease_epoch = ?
        """, [duration.milliseconds, id, held.token, held.epoch])
      return db.changes == 1
    }
  }

  package func release(_ id: String, held: HeldLease) throws {
    try catalog.write { db in
      try db.execute(
        """
        UPDATE uploads SET lease_holder = NULL, lease_until = NULL, lease_epoch = lease_epoch + ?
        WHERE id = ? AND lease_holder = ? AND lease_epoch = ?
        """, [held.dirty ? 1 : 0, id, held.token, held.epoch])
    }
  }

  package func isLeased(_ id: String) throws -> Bool {
    try catalog.read(snapshot: false) { db in
      try db.row(
        "SELECT CASE WHEN lease_until > \(db.dialect.nowMilliseconds) THEN 1 ELSE 0 END AS live FROM uploads WHERE id = ?",
        [id])?.int("live") == 1
    }
  }

  /// Bounded statements: SQLite's default limit on parameters is far above 500.
  package func inProgress(among ids: [String], now: Date) throws -> Set<String> {
    var open: Set<String> = []
    for start in stride(from: 0, to: ids.count, by: 500) {
      let batch = Array(ids[start..<min(start + 500, ids.count)])
      let marks = Array(repeating: "?", count: batch.count).joined(separator: ", ")
      let rows = try catalog.read(snapshot: false) { db in
        try db.rows(
          "SELECT id FROM uploads WHERE id IN (\(marks)) AND completed_at IS NULL AND expires_at >= ?",
          batch.map { $0 as any SQLBindable } + [now])
      }
      for row in rows { if let id = row.string("id") { open.insert(id) } }
    }
    return open
  }

  package func expire(dryRun: Bool) throws -> [(id: String, state: UploadDataState)] {
    let rows =
      try dryRun
      ? catalog.read { db in
        try db.rows("SELECT id, shared_state FROM uploads WHERE expires_at < \(db.dialect.nowMilliseconds)")
      }
      : catalog.write { db in
        try db.rows(
          "DELETE FROM uploads WHERE expires_at < \(db.dialect.nowMilliseconds) RETURNING id, shared_state")
      }
    return rows.compactMap { row in
      row.string("id").map { ($0, UploadDataState(stored: row.string("shared_state"))) }
    }
  }

  /// How many uploads are unfinished and the bytes they received, in a read of the caller's
  /// (the store's statistics, one snapshot over several tables).
  static func unfinished(_ db: any Database) throws -> (count: Int, bytes: Int64) {
    let row = try db.row(
      #"SELECT count(*) AS n, coalesce(sum("offset"), 0) AS bytes FROM uploads WHERE completed_at IS NULL"#)
    return (Int(row?.int("n") ?? 0), row?.int("bytes") ?? 0)
  }

  package func allIDs() throws -> Set<String> {
    try catalog.read { db in
      var ids: Set<String> = []
      try db.forEachRow("SELECT id FROM uploads") { if let id = $0.string("id") { ids.insert(id) } }
      return ids
    }
  }
}
