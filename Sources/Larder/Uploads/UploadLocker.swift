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
  /// Takes the upload's lease for an append of this process (whose slot it holds already), if
  /// its row is still as `expected` was read. False when it is not, or another process's lease
  /// runs: the caller reads the row again (it then knows which).
  func claim(_ expected: Upload) throws -> Bool

  /// Extends this process's lease on `id`.
  /// - Throws: ``UploadError/locked(id:)`` when it was lost (it ran out and another took it).
  func renew(_ id: String) throws

  /// Gives the lease back, if this process holds it (best effort: it runs out anyway).
  func release(_ id: String)

  /// The lease this process holds on `id`, nil when none (or when nothing beyond the process
  /// locks uploads).
  func heldLease(_ id: String) -> HeldLease?

  /// What every statement changing `id`'s row under this append checks that it still holds.
  func hold(_ id: String) -> UploadLeaseHold

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
  func claim(_ expected: Upload) throws -> Bool { true }
  func renew(_ id: String) throws {}
  func release(_ id: String) {}
  func heldLease(_ id: String) -> HeldLease? { nil }
  func hold(_ id: String) -> UploadLeaseHold { .slot }
  func isLeasedElsewhere(_ id: String) -> Bool { false }
  func leaseNewRow(_ id: String) -> HeldLease? { nil }
  func whileRenewing<T>(_ id: String, _ body: () throws -> T) throws -> T { try body() }
}

/// The catalog lease of shared mode (ARCHITECTURE.md, "Resumable uploads across nodes"):
/// `lease_holder`, `lease_until` and `lease_epoch` in the upload's row, taken with an append and
/// renewed while it runs, so a node that dies holding it blocks the upload for at most ``lease``.
/// Every commit checks that the lease is still this append's (``hold(_:)``): a node that stalled
/// past its lease cannot commit over the node that took over.
final class CatalogUploadLocker: UploadLocker {
  private let table: any UploadTable
  /// How long a lease lasts without renewal.
  let lease: Duration
  private let logger: Logger
  /// Called on the renewal timer's thread before each renewal (tests: a stopped process).
  private let beforeRenewal: (@Sendable () -> Void)?
  /// The catalog leases this process holds, by upload id.
  private let held = Mutex<[String: HeldLease]>([:])

  init(table: any UploadTable, lease: Duration, logger: Logger, beforeRenewal: (@Sendable () -> Void)?) {
    self.table = table
    self.lease = lease
    self.logger = logger
    self.beforeRenewal = beforeRenewal
  }

  /// On the catalog's clock: free, or run out by the catalog's time (never this node's, which
  /// may be ahead). Taking over a lease that was not given back (its holder died or stalled)
  /// moves the epoch.
  func claim(_ expected: Upload) throws -> Bool {
    let token = SecureRandom.hexIdentifier(byteCount: 8)
    guard let epoch = try table.claim(expected.id, token: token, duration: lease, expected: expected) else {
      return false
    }
    held.withLock { $0[expected.id] = HeldLease(token: token, epoch: epoch) }
    return true
  }

  func renew(_ id: String) throws { try renew(id, held: nil) }

  /// `held`: the lease a renewal timer started with.
  private func renew(_ id: String, held: HeldLease?) throws {
    guard let held = held ?? heldLease(id), try table.renew(id, held: held, duration: lease) else {
      throw UploadError.locked(id: id)
    }
  }

  /// After a store call that failed midway (a part of it may still land), the epoch moves, as
  /// for a takeover.
  func release(_ id: String) {
    guard let lease = held.withLock({ $0.removeValue(forKey: id) }) else { return }
    logger.bestEffort("give back the lease of upload \(id)") { try table.release(id, held: lease) }
  }

  func heldLease(_ id: String) -> HeldLease? { held.withLock { $0[id] } }

  /// Its token and its epoch (never true when this process holds no lease on `id`).
  func hold(_ id: String) -> UploadLeaseHold { heldLease(id).map { .lease($0) } ?? .lost }

  /// A catalog that cannot say is taken as "not running": the caller then answers as for an
  /// interrupted concatenation, which a retry corrects.
  func isLeasedElsewhere(_ id: String) -> Bool { (try? table.isLeased(id)) ?? false }

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
