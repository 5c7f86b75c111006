import Foundation
import LarderCrypto
import Synchronization

/// tus's concatenation (`Upload-Concat`): finished partial uploads copied, in order, into the
/// content of a final upload, which is then published like any other. The copy runs on a
/// thread of its own, holding the final's lease and its partials'.
extension UploadStore {
  /// A final concatenation, recorded and held but not yet copied: its row exists (offset 0,
  /// completed_at NULL) and its lease and its partials' leases are taken until it is settled.
  public struct Concatenation: Sendable {
    /// The final upload as recorded now (offset 0).
    public let upload: Upload
    let parts: [Upload]
    let leases: [String]
  }

  /// Concatenates finished partial uploads (in order) into a final upload, staged for
  /// publishing: ``prepareConcatenation(bucket:name:owner:metadata:partials:received:sizeLimit:authorize:)``
  /// then ``copy(_:)`` on the calling thread.
  public func concatenate(
    bucket: String, name: String, owner: String?, metadata: [String: String], partials ids: [String],
    received: String? = nil, sizeLimit: Int64? = nil, authorize: (_ size: Int64) throws -> Void = { _ in }
  ) throws -> CompletedUpload {
    try copy(
      prepareConcatenation(
        bucket: bucket, name: name, owner: owner, metadata: metadata, partials: ids, received: received,
        sizeLimit: sizeLimit, authorize: authorize))
  }

  /// Validates a concatenation and records its final upload, without copying a byte.
  ///
  /// The partials are checked as the caller's first (a stranger naming someone's partials never
  /// takes their leases), then their leases are taken and they are checked again under them, so
  /// none is appended to or terminated until the copy is settled. `authorize` is called with
  /// the total size (the permission check). `received` is the client's `Upload-Concat` as sent
  /// (`final;<urls>`), recorded so it can be echoed; by default `final;` and the ids.
  /// - Throws: ``UploadError/invalidConcatenation(_:)`` for an unknown, busy, non-partial or
  ///   unfinished partial, ``UploadError/dataLost(id:)`` when a partial's bytes are gone,
  ///   ``LarderError/sizeLimitExceeded(limit:)``, whatever `authorize` throws.
  public func prepareConcatenation(
    bucket: String, name: String, owner: String?, metadata: [String: String], partials ids: [String],
    received: String? = nil, sizeLimit: Int64? = nil, authorize: (_ size: Int64) throws -> Void = { _ in }
  ) throws -> Concatenation {
    try ObjectName.validateBucket(bucket)
    try ObjectName.validateName(name)
    try ObjectStore.validateMetadata(Self.objectOptions(metadata: metadata).metadata)
    guard !ids.isEmpty else {
      throw UploadError.invalidConcatenation("Upload-Concat: final names no partial uploads")
    }
    func unusable(_ id: String, _ error: any Error) -> UploadError {
      .invalidConcatenation("partial upload \(id.prefix(64)) is unusable: \(error)")
    }
    func parts() throws -> [Upload] {
      var byID: [String: Upload] = [:]
      return try ids.map { id in
        if let known = byID[id] { return known }
        guard Self.isUploadID(id) else { throw unusable(id, UploadError.notFound(id: id)) }
        let part: Upload
        do {
          part = try upload(id: id, owner: owner)
        } catch let error as UploadError {
          throw unusable(id, error)
        }
        guard part.bucket.hasSameBytes(as: bucket), part.isPartial else {
          throw UploadError.invalidConcatenation("upload \(id.prefix(64)) is not a partial upload of this bucket")
        }
        guard part.isComplete else {
          throw UploadError.invalidConcatenation("partial upload \(id.prefix(64)) is not finished")
        }
        byID[id] = part
        return part
      }
    }
    _ = try parts()
    var held: [String] = []
    do {
      for id in Set(ids) {
        do { _ = try acquire(id) } catch { throw unusable(id, error) }
        held.append(id)
      }
      let parts = try parts()
      for id in Set(parts.map(\.id)) { try data.checkPartial(parts.first(where: { $0.id == id })!) }
      let total = parts.reduce(Int64(0)) { $0 + $1.offset }
      if let sizeLimit, total > sizeLimit { throw LarderError.sizeLimitExceeded(limit: sizeLimit) }
      try authorize(total)
      let now = now()
      var final = Upload(
        id: SecureRandom.hexIdentifier(byteCount: 16), bucket: bucket, name: name, owner: owner, length: total,
        offset: 0, metadata: metadata, concat: .final(ids), expiresAt: now + expiry.timeInterval, createdAt: now,
        completedAt: nil, receivedConcat: received)
      _ = try acquire(final.id)
      held.append(final.id)
      // Shared mode: the final is born leased, so other nodes see its concatenation running
      // (``isConcatenating(_:)``) while this one copies it, and see it interrupted once it ran out.
      // Its lease runs from the catalog's clock, as every lease.
      let lease = locker.leaseNewRow(final.id)
      let expiresAt = try table.insert(final, expiry: expiry, lease: lease.map { ($0, self.lease) })
      if let expiresAt { final = final.expiring(at: expiresAt) }
      return Concatenation(upload: final, parts: parts, leases: held)
    } catch {
      for id in held { release(id, keeping: nil) }
      throw error
    }
  }

  /// Copies the partials into one staged blob (hashing and sniffing it): the slow part, up to
  /// the maximum upload size of reading and writing. On failure the final upload is deleted.
  /// - Throws: ``UploadError/dataLost(id:)`` when a partial's bytes are gone, I/O errors.
  public func copy(_ concatenation: Concatenation) throws -> CompletedUpload {
    let final = concatenation.upload
    do {
      let writer = try larder.files.makeWriter()
      var renewed = ContinuousClock.now
      for part in concatenation.parts {
        try data.readPartial(part) { chunk in
          try writer.write(chunk)
          if ContinuousClock.now - renewed > lease / 3 {
            try locker.renew(final.id)
            renewed = .now
          }
        }
      }
      let staged = try writer.finish()
      let done = Upload(
        id: final.id, bucket: final.bucket, name: final.name, owner: final.owner, length: final.length,
        offset: staged.size, metadata: final.metadata, concat: final.concat, expiresAt: final.expiresAt,
        createdAt: final.createdAt, completedAt: now(), receivedConcat: final.receivedConcat)
      return CompletedUpload(upload: done, staged: staged, store: self, session: nil, leases: concatenation.leases)
    } catch {
      remember(final, error)
      abandon(final.id, leases: concatenation.leases)
      throw error
    }
  }

  /// Copies and publishes a concatenation on a background queue, never on the caller's (a
  /// server thread serving other connections: a 5 GiB copy would stall them for seconds).
  /// The caller waits at most `wait`: a small concatenation is then settled when this returns
  /// (its result, success or the error to answer), so its client can read the object at once;
  /// a large one returns nil and goes on, its final upload incomplete until it is published
  /// (see ``isConcatenating(_:)``). A failure after that is remembered for the owner's next
  /// look at the final upload (``upload(id:owner:)`` throws it).
  public func concatenate(
    _ concatenation: Concatenation, wait: Duration,
    publish: @escaping @Sendable (CompletedUpload) throws -> Void
  ) -> Result<Void, any Error>? {
    let outcome = Outcome()
    let id = concatenation.upload.id
    concatenating.withLock { _ = $0.insert(id) }
    // A thread of its own, not a Dispatch queue: Dispatch's width for non-overcommit queues is
    // the core count, and one busy with other blocking work would delay a small
    // concatenation past `wait`. Concatenations are rare; each holds its final's lease.
    let thread = Thread {
      let result = Result { try publish(try self.copy(concatenation)) }
      if case .failure(let error) = result { self.remember(concatenation.upload, error) }
      self.concatenating.withLock { _ = $0.remove(id) }
      outcome.set(result)
    }
    thread.name = "larder-concatenation"
    thread.start()
    return outcome.wait(wait)
  }

  /// A background concatenation's result, handed to a caller that may have stopped waiting.
  private final class Outcome: Sendable {
    private let value = Mutex<Result<Void, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)
    func set(_ result: Result<Void, any Error>) {
      value.withLock { $0 = result }
      done.signal()
    }
    func wait(_ duration: Duration) -> Result<Void, any Error>? {
      guard done.wait(timeout: .now() + duration.timeInterval) == .success else { return nil }
      return value.withLock { $0 }
    }
  }

  /// Whether this final upload's concatenation is running in this process. A final upload not
  /// completed and not running was interrupted (the process stopped): its bytes were never made.
  public func isConcatenating(_ id: String) -> Bool {
    if concatenating.withLock({ $0.contains(id) }) || slots.withLock({ $0.byID[id]?.busy == true }) { return true }
    // Shared mode: another node's, while its lease runs by the catalog's clock.
    guard Self.isUploadID(id) else { return false }
    return locker.isLeasedElsewhere(id)
  }

  func remember(_ upload: Upload, _ error: any Error) {
    failures.withLock { failures in
      failures.append((upload.id, upload.owner, error))
      if failures.count > Self.maxRememberedFailures { failures.removeFirst(failures.count - Self.maxRememberedFailures) }
    }
  }

  /// Deletes an unpublished final upload's row and gives back the leases it held.
  func abandon(_ id: String, leases: [String]) {
    larder.logger.bestEffort("delete unpublished final upload \(id) (gc collects it when it expires)") {
      try table.delete(id, unfinishedOnly: true, hold: nil)
    }
    for lease in leases { release(lease, keeping: nil) }
  }
}
