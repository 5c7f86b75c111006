import Foundation
import LarderCrypto
import LarderLogging
import Synchronization

/// What keeps one writer per upload beyond this process (tusd's `Locker`), chosen once with the
/// upload's data store when an ``UploadStore`` is made. Inside a process an upload's slot in
/// ``UploadStore`` is its lock; a locker adds what other processes and nodes must see.
///
/// - ``ProcessUploadLocker``: nothing beyond the slot (one node: its data directory's files).
/// - ``CatalogUploadLocker``: a lease in the upload's catalog row, timed by the catalog's clock,
///   that runs out if its holder dies (several nodes continuing each other's uploads).
protocol UploadLocker: Sendable {
  /// Takes the upload's lease for an append of this process (whose slot it holds already).
  /// - Throws: ``UploadError/locked(id:)`` while another process's lease runs,
  ///   ``UploadError/notFound(id:)`` when there is no such upload.
  func claim(_ id: String) throws

  /// Extends this process's lease on `id`.
  /// - Throws: ``UploadError/locked(id:)`` when it was lost (it ran out and another took it).
  func renew(_ id: String) throws

  /// Gives the lease back, if this process holds it (best effort: it runs out anyway).
  func release(_ id: String)

  /// The lease this process holds on `id`, nil when none (or when nothing beyond the process
  /// locks uploads).
  func heldLease(_ id: String) -> HeldLease?

  /// The SQL condition, and its arguments, that this process still holds the lease on `id`,
  /// which every commit of the upload's row adds; nil when the slot alone guards it.
  func holding(_ id: String) -> (sql: String, arguments: [any SQLBindable])?

  /// A condition (`" AND …"` on the `uploads` row, or `""`) that no other process's lease runs
  /// on it: what a termination adds.
  func unleased(_ db: Database) -> String

  /// Whether a lease of another process runs on `id` now (a concatenation going on elsewhere).
  func isLeasedElsewhere(_ id: String) -> Bool

  /// A lease for a row about to be inserted (a final concatenation, born leased so that other
  /// nodes see it running), held by this process from now on; nil when none is needed.
  func leaseNewRow(_ id: String) -> HeldLease?

  /// Runs `body` (a long store call of an append) with the lease on `id` renewed meanwhile.
  func whileRenewing<T>(_ id: String, _ body: () throws -> T) throws -> T
}

/// One node's uploads: the slot in ``UploadStore`` is the only lock an append needs.
struct ProcessUploadLocker: UploadLocker {
  func claim(_ id: String) throws {}
  func renew(_ id: String) throws {}
  func release(_ id: String) {}
  func heldLease(_ id: String) -> HeldLease? { nil }
  func holding(_ id: String) -> (sql: String, arguments: [any SQLBindable])? { nil }
  func unleased(_ db: Database) -> String { "" }
  func isLeasedElsewhere(_ id: String) -> Bool { false }
  func leaseNewRow(_ id: String) -> HeldLease? { nil }
  func whileRenewing<T>(_ id: String, _ body: () throws -> T) throws -> T { try body() }
}

/// The catalog lease of shared mode (ARCHITECTURE.md, "Resumable uploads across nodes"):
/// `lease_holder`, `lease_until` and `lease_epoch` in the upload's row, taken with an append and
/// renewed while it runs, so a node that dies holding it blocks the upload for at most ``lease``.
/// Every commit checks that the lease is still this append's (``holding(_:)``): a node that stalled
/// past its lease cannot commit over the node that took over.
final class CatalogUploadLocker: UploadLocker {
  private let catalog: Catalog
  /// How long a lease lasts without renewal.
  let lease: Duration
  private let logger: Logger
  /// Called on the renewal timer's thread before each renewal (tests: a stopped process).
  private let beforeRenewal: (@Sendable () -> Void)?
  /// The catalog leases this process holds, by upload id.
  private let held = Mutex<[String: HeldLease]>([:])

  init(catalog: Catalog, lease: Duration, logger: Logger, beforeRenewal: (@Sendable () -> Void)?) {
    self.catalog = catalog
    self.lease = lease
    self.logger = logger
    self.beforeRenewal = beforeRenewal
  }

  /// On the catalog's clock: free, or run out by the catalog's time (never this node's, which
  /// may be ahead). Taking over a lease that was not given back (its holder died or stalled)
  /// moves the epoch.
  func claim(_ id: String) throws {
    let token = SecureRandom.hexIdentifier(byteCount: 8)
    let lease = lease
    let epoch: Int64? = try catalog.write { db in
      let now = db.dialect.nowMilliseconds
      let rows = try db.rows(
        """
        UPDATE uploads SET lease_holder = ?, lease_until = \(now) + ?,
          lease_epoch = lease_epoch + CASE WHEN lease_holder IS NULL THEN 0 ELSE 1 END
        WHERE id = ? AND (lease_until IS NULL OR lease_until < \(now))
        RETURNING lease_epoch
        """, [token, lease.milliseconds, id])
      if let row = rows.first { return row.int("lease_epoch") ?? 0 }
      guard try db.row("SELECT 1 FROM uploads WHERE id = ?", [id]) != nil else {
        throw UploadError.notFound(id: id)
      }
      return nil
    }
    guard let epoch else { throw UploadError.locked(id: id) }
    held.withLock { $0[id] = HeldLease(token: token, epoch: epoch) }
  }

  func renew(_ id: String) throws { try renew(id, held: nil) }

  /// `held`: the lease a renewal timer started with.
  private func renew(_ id: String, held: HeldLease?) throws {
    guard let held = held ?? heldLease(id) else { throw UploadError.locked(id: id) }
    let lease = lease
    try catalog.write { db in
      try db.execute(
        """
        UPDATE uploads SET lease_until = \(db.dialect.nowMilliseconds) + ?
        WHERE id = ? AND lease_holder = ? AND lease_epoch = ?
        """, [lease.milliseconds, id, held.token, held.epoch])
      guard db.changes == 1 else { throw UploadError.locked(id: id) }
    }
  }

  /// After a store call that failed midway (a part of it may still land), the epoch moves, as
  /// for a takeover.
  func release(_ id: String) {
    guard let lease = held.withLock({ $0.removeValue(forKey: id) }) else { return }
    logger.bestEffort("give back the lease of upload \(id)") {
      try catalog.write { db in
        try db.execute(
          """
          UPDATE uploads SET lease_holder = NULL, lease_until = NULL, lease_epoch = lease_epoch + ?
          WHERE id = ? AND lease_holder = ? AND lease_epoch = ?
          """, [lease.dirty ? 1 : 0, id, lease.token, lease.epoch])
      }
    }
  }

  func heldLease(_ id: String) -> HeldLease? { held.withLock { $0[id] } }

  /// Its token and its epoch (never true when this process holds no lease on `id`).
  func holding(_ id: String) -> (sql: String, arguments: [any SQLBindable])? {
    let lease = heldLease(id)
    return ("lease_holder = ? AND lease_epoch = ?", [lease?.token, lease?.epoch])
  }

  func unleased(_ db: Database) -> String {
    " AND (lease_until IS NULL OR lease_until < \(db.dialect.nowMilliseconds))"
  }

  /// A catalog that cannot say is taken as "not running": the caller then answers as for an
  /// interrupted concatenation, which a retry corrects.
  func isLeasedElsewhere(_ id: String) -> Bool {
    let live = try? catalog.read(snapshot: false) { db in
      try db.row(
        "SELECT CASE WHEN lease_until > \(db.dialect.nowMilliseconds) THEN 1 ELSE 0 END AS live FROM uploads WHERE id = ?",
        [id])?.int("live")
    }
    return (live ?? nil) == 1
  }

  /// Its lease runs from the catalog's clock, as every lease (the row's insert sets it).
  func leaseNewRow(_ id: String) -> HeldLease? {
    let lease = HeldLease(token: SecureRandom.hexIdentifier(byteCount: 8), epoch: 0)
    held.withLock { $0[id] = lease }
    return lease
  }

  /// A part of hundreds of MiB outlives a 10 s lease; a call that fails marks the lease dirty.
  func whileRenewing<T>(_ id: String, _ body: () throws -> T) throws -> T {
    guard let lease = heldLease(id) else { return try body() }
    let hook = beforeRenewal
    let renewer = LeaseRenewer(every: self.lease / 3) { [self] in
      hook?()
      try renew(id, held: lease)
    }
    defer { renewer.stop() }
    do {
      return try body()
    } catch {
      held.withLock { $0[id]?.dirty = true }
      throw error
    }
  }
}
