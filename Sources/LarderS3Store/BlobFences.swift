import Foundation
import Larder
import LarderCrypto

/// Fenced deletion of blobs in a remote store (ARCHITECTURE.md, "Fenced deletion").
///
/// A blob's bytes in S3 live at a ``BlobAddress``: its SHA-256 and its row's fence. Three rules
/// make every deletion safe without any lock or session staying alive:
/// 1. A fence is handed out once (``next(_:)``: a PostgreSQL SEQUENCE, or a counter row on
///    SQLite), only to a writer about to upload, and a row `(sha256, F)` is only ever inserted
///    (or moved to `F`) by the writer that uploaded to `F` first.
/// 2. A collector deletes bytes only of an address whose row it has already deleted, or which
///    is below the *floor* (no writer can commit it any more), and only after committing a
///    deletion intent for it (`blob_deletions`), in a short transaction of its own; the S3
///    DELETEs follow with no transaction open, then the intents go.
/// 3. A writer commits an address only if its fence is at or above the floor, read inside its
///    write transaction.
/// So the address a DELETE targets is one that no row names and none ever will again: a DELETE
/// that is late, duplicated, or sent by a collector whose session (and lock) is long gone
/// removes nothing anyone relies on.
enum BlobFences {
  /// A fence no writer had before. Called with no transaction open: on PostgreSQL `nextval`
  /// takes no lock and is never rolled back; on SQLite a tiny write transaction of its own.
  static func next(_ catalog: Catalog) throws -> Int64 {
    let (sql, writes) = catalog.dialect.nextFence
    let fence =
      writes
      ? try catalog.write(releasingReserve: false) { db in try db.row(sql)?.int("fence") }
      : try catalog.read(snapshot: false) { db in try db.row(sql)?.int("fence") }
    guard let fence, fence > 0 else {
      throw LarderError.invalidArgument("the catalog handed out no blob fence")
    }
    return fence
  }

  /// The lowest fence a writer may still commit (read inside its write transaction).
  static func floor(_ db: Database) throws -> Int64 {
    try db.row("SELECT fence FROM blob_fences WHERE name = 'floor'")?.int("fence") ?? 1
  }

  /// The first fence not handed out yet.
  private static func firstUnissued(_ db: Database) throws -> Int64 {
    try db.row(db.dialect.firstUnissuedFence)?.int("next") ?? 1
  }

  /// Raises the floor to the last *mark* (the first unissued fence as it was then) once that
  /// mark is older than `age`, and sets a new mark: every fence a writer took more than `age`
  /// ago can then never be committed, so its stray bytes are safe to delete. A writer still
  /// holding one finds it below the floor and uploads again to a fresh fence (the age only
  /// spares in-flight writers that retry; safety never depends on a clock).
  /// - Returns: the floor now.
  static func raiseFloor(_ catalog: Catalog, now: Date, age: TimeInterval) throws -> Int64 {
    try catalog.write { db in
      let floor = try floor(db)
      guard let mark = try db.row("SELECT fence, at FROM blob_fences WHERE name = 'mark'"),
        let fence = mark.int("fence"), let at = mark.date("at"), at <= now.addingTimeInterval(-age)
      else { return floor }
      let raised = max(floor, fence)
      try db.execute("UPDATE blob_fences SET fence = ?, at = ? WHERE name = 'floor'", [raised, now])
      try db.execute(
        "UPDATE blob_fences SET fence = ?, at = ? WHERE name = 'mark'", [try firstUnissued(db), now])
      return raised
    }
  }

  /// Whether `address` may be committed by a writer's transaction: it uploaded there itself,
  /// after taking the fence from ``next(_:)``, and the floor has not passed it.
  static func mayCommit(_ address: BlobAddress, in db: Database) throws -> Bool {
    address.fence >= (try floor(db))
  }
}

/// The collector's committed deletion intents (`blob_deletions`): addresses whose row is gone
/// (or which no row can ever name) and whose bytes are still to be deleted.
enum BlobDeletions {
  /// Records intents for `addresses` inside the caller's write transaction; returns those not
  /// already intended (another collector's), which the caller then owns and counts.
  @discardableResult
  static func record(_ addresses: [BlobAddress], in db: Database, at now: Date = Date()) throws
    -> [BlobAddress]
  {
    var recorded: [BlobAddress] = []
    for address in addresses {
      try db.execute(
        "INSERT INTO blob_deletions(sha256, fence, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        [address.sha256, address.fence, now])
      if db.changes > 0 { recorded.append(address) }
    }
    return recorded
  }

  /// Deletes the bytes of `addresses` (intents already committed), then their intents. Runs
  /// with no transaction open: an S3 call never waits under a catalog lock. `midway` is a test
  /// hook, run after half of the DELETEs. A failure leaves the intents for the next run.
  static func finish(_ addresses: [BlobAddress], store: S3ContentStore, midway: () throws -> Void = {}) throws {
    guard !addresses.isEmpty else { return }
    for (index, address) in addresses.enumerated() {
      if index == addresses.count / 2 && index > 0 { try midway() }
      try store.remove(address)
    }
    try store.catalog.write { db in
      for address in addresses {
        try db.execute(
          "DELETE FROM blob_deletions WHERE sha256 = ? AND fence = ?", [address.sha256, address.fence])
      }
    }
  }

  /// Finishes the intents a collector left behind (it died, or its session did, between its
  /// intents' commit and their removal), or that one running beside this one has not finished
  /// yet: a DELETE sent twice is harmless. Returns the addresses it finished (with `dryRun`,
  /// those it would).
  static func finishLeftovers(store: S3ContentStore, dryRun: Bool = false, batchSize: Int = 500) throws
    -> [BlobAddress]
  {
    var cursor: (sha256: [UInt8], fence: Int64) = ([], -1)
    var finished: [BlobAddress] = []
    while true {
      let page: [BlobAddress] = try store.catalog.read { db in
        try db.rows(
          """
          SELECT sha256, fence FROM blob_deletions WHERE sha256 > ? OR (sha256 = ? AND fence > ?)
          ORDER BY sha256, fence LIMIT ?
          """, [cursor.sha256, cursor.sha256, cursor.fence, batchSize]
        ).compactMap { row in
          guard let sha256 = row.bytes("sha256"), let fence = row.int("fence") else { return nil }
          return BlobAddress(sha256: sha256, fence: fence)
        }
      }
      guard let last = page.last else { return finished }
      cursor = (last.sha256, last.fence)
      if !dryRun { try finish(page, store: store) }
      finished += page
      if page.count < batchSize { return finished }
    }
  }

  /// Of `candidates` (stored addresses older than the temp age), those no row names, not
  /// already intended, and below `floor`: strays nobody can commit any more. Read on a
  /// snapshot taken after the floor was raised: a row committed before that is seen, and none
  /// below the floor can be committed after it.
  static func strays(_ candidates: [(address: BlobAddress, size: Int64)], floor: Int64, catalog: Catalog)
    throws -> [(
      address: BlobAddress, size: Int64
    )]
  {
    try catalog.read { db in
      try candidates.filter { candidate in
        let address = candidate.address
        guard address.fence < floor else { return false }
        let arguments: [any SQLBindable] = [address.sha256, address.fence]
        return try db.row("SELECT 1 FROM blobs WHERE sha256 = ? AND fence = ?", arguments) == nil
          && db.row("SELECT 1 FROM blob_deletions WHERE sha256 = ? AND fence = ?", arguments) == nil
      }
    }
  }

  /// Condemns `strays` (see ``strays(_:floor:catalog:)``) with committed intents and deletes
  /// their bytes. Returns the ones this call condemned: a stray another collector condemned
  /// first is that one's to count.
  static func removeStrays(_ strays: [(address: BlobAddress, size: Int64)], store: S3ContentStore) throws
    -> [(address: BlobAddress, size: Int64)]
  {
    guard !strays.isEmpty else { return [] }
    let owned = try store.catalog.write { db in
      // Rechecked under the write lock, though the floor already rules a new row out.
      let unclaimed = try strays.filter {
        try db.row(
          "SELECT 1 FROM blobs WHERE sha256 = ? AND fence = ?", [$0.address.sha256, $0.address.fence]) == nil
      }
      return Set(try record(unclaimed.map(\.address), in: db))
    }
    let condemned = strays.filter { owned.contains($0.address) }
    try finish(condemned.map(\.address), store: store)
    return condemned
  }
}
