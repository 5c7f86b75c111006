import Foundation
import LarderCrypto
import Synchronization

/// Resumable uploads (the storage half of tus): create, append, publish, terminate, concatenate.
///
/// ```swift
/// let uploads = UploadStore(larder: larder)
/// let upload = try uploads.create(bucket: "app", name: "video.mp4", owner: "u1", length: 3)
/// let append = try uploads.beginAppend(id: upload.id, owner: "u1", offset: 0)
/// try append.write(Data("abc".utf8))
/// if case .complete(let done) = try append.finish() { _ = try uploads.publish(done) }
/// ```
/// Layout: the bytes of upload `<id>` are `uploads/<id>`; its row in `uploads` holds the
/// acknowledged offset. An append writes and fsyncs the file, then commits the offset; a crash
/// in between leaves a longer file, which the next load truncates. The last byte of a
/// non-partial upload is never committed as an offset: publishing the object and marking the
/// row completed happen in one transaction, so a crash before it makes the client resend the
/// last chunk, and one after it leaves a completed row (the file is unlinked, or collected
/// with the row when it expires). With blobs in S3 (shared mode, ``SharedUploadData``)
/// the bytes also go to the bucket before each commit and the file is a cache, so any node
/// continues the upload.
///
/// One writer per upload: ``beginAppend(_:owner:offset:length:checksum:sizeLimit:checkpoints:)``
/// takes the upload's lease (in shared mode also a catalog lease that runs out, ``lease``) and
/// throws ``UploadError/locked(id:)`` while another append holds it. Hot uploads keep their
/// file open and their running digests in memory.
///
/// The store decides; three seams given at `init` do the rest (tusd's shape): ``UploadTable``
/// runs every statement on `uploads`, an ``UploadDataStore`` keeps the bytes (it opens an
/// upload from its row, commits, stages and purges, and never sees this store), and an
/// ``UploadLocker`` is what other processes see of an append.
///
/// Ownership: every call takes the caller's uid (nil for anonymous); an upload created by one
/// uid is invisible (``UploadError/notFound(id:)``) to any other, and an anonymous one only to
/// anonymous callers.
public final class UploadStore: Sendable {
  public let larder: Larder
  /// How long an upload lives after its creation or its last append.
  public let expiry: Duration
  /// How often a long append commits what it has received (nil: only at its end).
  public let checkpoints: UploadCheckpoints?
  /// Shared mode (several nodes): how long an append's catalog lease lasts without renewal, so
  /// how long a node that died mid-append keeps others from continuing its upload.
  public let lease: Duration
  private let maxIdleSessions: Int
  let slots = Mutex(Slots())
  /// Every statement on the `uploads` table.
  let table: any UploadTable
  /// What locks an upload beyond this process: nothing, or a catalog lease (shared mode).
  let locker: any UploadLocker
  /// Where uploads' bytes wait between appends: this node's data directory, or shared between
  /// nodes (S3).
  let data: any UploadDataStore
  /// This node's clock, for creation and completion dates (``now()``).
  private let clock: @Sendable () -> Date
  private let lastStagingSweep = Mutex(ContinuousClock.now)
  /// Why recent background concatenations failed (their rows are gone), for the client's next
  /// look; bounded, oldest forgotten first.
  let failures = Mutex<[(id: String, owner: String?, error: any Error)]>([])
  /// Final uploads whose background concatenation has not yet recorded its outcome. A refusal
  /// at publish releases the final's lease before the thread can remember the error, so the
  /// lease alone would let a HEAD in between see "not running" and answer 410.
  let concatenating = Mutex<Set<String>>([])
  static let maxRememberedFailures = 256

  struct Slot {
    var busy: Bool
    var session: UploadSession?
    var lastUsed: UInt64
  }

  /// The in-process leases, and how many were given back: a row read when that count was the
  /// same as now was read after every append of this process that could have changed it.
  struct Slots {
    var byID: [String: Slot] = [:]
    var released: UInt64 = 0
  }

  /// - Parameters:
  ///   - clock: this node's clock (tests: one that is wrong).
  ///   - storage: where the bytes of uploads any node continues go, instead of the blob
  ///     backend's (tests: a store that stalls or misbehaves on cue). With neither (the blob
  ///     backend cannot hold uploads), they stay in this node's data directory.
  ///   - table: the statements on `uploads` (tests: wrapped to count or delay them).
  ///   - beforeRenewal: called on a lease's renewal timer before each renewal (tests: blocking
  ///     there stops renewals as a stopped process would).
  package init(
    larder: Larder, expiry: Duration = .seconds(24 * 3600), maxIdleSessions: Int = 64,
    checkpoints: UploadCheckpoints? = .default, lease: Duration = .seconds(10),
    clock: @escaping @Sendable () -> Date = { Date() }, storage: (any SharedUploadStorage)? = nil,
    table: (any UploadTable)? = nil, beforeRenewal: (@Sendable () -> Void)? = nil
  ) {
    self.larder = larder
    self.lease = lease
    self.clock = clock
    let table = table ?? CatalogUploadTable(catalog: larder.catalog)
    self.table = table
    // Chosen once: uploads whose bytes any node may continue are locked by a catalog lease.
    let storage = storage ?? larder.sharedUploads
    locker =
      storage == nil
      ? ProcessUploadLocker()
      : CatalogUploadLocker(table: table, lease: lease, logger: larder.logger, beforeRenewal: beforeRenewal)
    data = Self.dataStore(of: larder, storage: storage, locker: locker)
    self.expiry = expiry
    self.checkpoints = checkpoints
    self.maxIdleSessions = maxIdleSessions
    sweepStagingFiles()
  }

  public convenience init(
    larder: Larder, expiry: Duration = .seconds(24 * 3600), maxIdleSessions: Int = 64,
    checkpoints: UploadCheckpoints? = .default, lease: Duration = .seconds(10)
  ) {
    self.init(
      larder: larder, expiry: expiry, maxIdleSessions: maxIdleSessions, checkpoints: checkpoints, lease: lease,
      clock: { Date() })
  }

  /// This node's clock, for creation and completion dates. Expiries and leases are written
  /// and judged on the catalog's clock (``SQLDialect/nowMilliseconds``), so a node whose clock
  /// runs ahead never expires another node's upload in progress.
  func now() -> Date { clock() }

  // MARK: - creation

  /// Creates an upload (`length` nil = deferred) and its empty file.
  /// - Throws: ``LarderError/invalidArgument(_:)`` (no name for a non-partial upload, bad metadata),
  ///   ``LarderError/invalidBucket(_:reason:)``, ``LarderError/invalidName(_:reason:)``.
  public func create(
    bucket: String, name: String?, owner: String?, length: Int64?, metadata: [String: String] = [:],
    partial: Bool = false
  ) throws -> Upload {
    sweepStagingFilesIfDue()
    try ObjectName.validateBucket(bucket)
    if let length, length < 0 { throw LarderError.invalidArgument("Upload-Length must not be negative") }
    if !partial {
      guard let name else {
        throw LarderError.invalidArgument("Upload-Metadata must carry the object's name as the key 'name'")
      }
      try ObjectName.validateName(name)
      try ObjectStore.validateMetadata(Self.objectOptions(metadata: metadata).metadata)
    }
    let now = now()
    var upload = Upload(
      id: SecureRandom.hexIdentifier(byteCount: 16), bucket: bucket, name: partial ? nil : name, owner: owner,
      length: length, offset: 0, metadata: metadata, concat: partial ? .partial : nil,
      expiresAt: now + expiry.timeInterval, createdAt: now, completedAt: nil)
    try data.create(upload.id)
    // No append can have touched a row no one else knows of yet: it is current as created.
    let released = slots.withLock { $0.released }
    do {
      if let expiresAt = try table.insert(upload, expiry: expiry, lease: nil) { upload = upload.expiring(at: expiresAt) }
    } catch {
      _ = try? data.purge(upload.id, state: .none, background: true)
      throw error
    }
    upload.readAt = released
    return upload
  }

  // MARK: - reading

  /// The upload, if `owner` may see it.
  /// - Throws: ``UploadError/notFound(id:)``, ``UploadError/expired(id:)``.
  public func upload(id: String, owner: String?) throws -> Upload {
    guard Self.isUploadID(id) else { throw UploadError.notFound(id: id) }
    // Before the read: an append of this process released after it makes the row stale.
    let released = slots.withLock { $0.released }
    guard let (stored, expired) = try table.row(id) else {
      if let failed = failures.withLock({ $0.last { $0.id == id } }), failed.owner.hasSameBytes(as: owner) {
        throw failed.error
      }
      throw UploadError.notFound(id: id)
    }
    var upload = stored
    // Bytes: a uid "K" must not pass for the owner "\u{212A}" (Kelvin), nor NFC for NFD.
    guard upload.owner.hasSameBytes(as: owner) else { throw UploadError.notFound(id: id) }
    guard !expired else { throw UploadError.expired(id: id) }
    upload.readAt = released
    return upload
  }

  // MARK: - appending

  /// Starts an append at `offset` of the upload `id`: ``beginAppend(_:owner:offset:length:checksum:sizeLimit:checkpoints:md5:)``
  /// of the row ``upload(id:owner:)`` reads.
  public func beginAppend(
    id: String, owner: String?, offset: Int64, length declared: Int64? = nil, checksum: UploadChecksum? = nil,
    sizeLimit: Int64? = nil, checkpoints: Bool = true, md5: Bool = false
  ) throws -> UploadAppend {
    try beginAppend(
      upload(id: id, owner: owner), owner: owner, offset: offset, length: declared, checksum: checksum,
      sizeLimit: sizeLimit, checkpoints: checkpoints, md5: md5)
  }

  /// Starts an append at `offset` of `upload`, as the caller read it with ``upload(id:owner:)``
  /// (its owner and expiry judged then: the row is not read again unless it may have changed
  /// since), optionally declaring a deferred length. `sizeLimit` bounds the upload's total size
  /// while its length is still deferred. With `checkpoints` (and no `checksum`) a long append
  /// commits what it received as it goes (see ``UploadAppend``); a protocol whose clients
  /// resend a broken chunk whole (Firebase's) passes false. With `md5` (a protocol whose answer
  /// reports `md5Hash`) the MD5 is kept up as the bytes arrive, while every append of the upload
  /// asks for it.
  ///
  /// The row is current once the lease is taken: on one node no append of this process was
  /// released since the read (only the holder of an upload's slot changes its row); with a
  /// catalog lease, the claim itself checks that the row is still as read. Otherwise it is read
  /// again, under the lease.
  /// - Throws: ``UploadError`` (`notFound`, `expired`, `locked`, `offsetMismatch`, `invalidLength`,
  ///   `finalNotAppendable`, `exceedsLength` for a completed upload), I/O errors.
  public func beginAppend(
    _ read: Upload, owner: String?, offset: Int64, length declared: Int64? = nil, checksum: UploadChecksum? = nil,
    sizeLimit: Int64? = nil, checkpoints: Bool = true, md5: Bool = false
  ) throws -> UploadAppend {
    let id = read.id
    guard read.owner.hasSameBytes(as: owner) else { throw UploadError.notFound(id: id) }
    // A final upload is never appended to, even while its concatenation holds its lease. The
    // owner was checked by the read: a stranger never takes the lease, so never makes the
    // owner's append wait (423) nor drops its hot session.
    if read.isFinal { throw UploadError.finalNotAppendable(id: id) }
    let (cached, released) = try acquire(id)
    do {
      var upload = read.readAt == released ? read : try self.upload(id: id, owner: owner)
      try Self.check(upload, offset: offset)
      if try !locker.claim(upload) {
        upload = try self.upload(id: id, owner: owner)
        try Self.check(upload, offset: offset)
        guard try locker.claim(upload) else { throw UploadError.locked(id: id) }
      }
      var length = upload.length
      if let declared {
        if let length, length != declared {
          throw UploadError.invalidLength("Upload-Length is already \(length) and cannot change")
        }
        guard declared >= upload.offset else {
          throw UploadError.invalidLength(
            "Upload-Length \(declared) is smaller than the offset \(upload.offset)")
        }
        length = declared
      }
      let (session, record) = try data.open(upload, cached: cached)
      if let record {
        try self.record(id, record)
        upload = upload.with(dataState: record)
      }
      return UploadAppend(
        upload: upload, length: length, store: self, session: session, checksum: checksum,
        sizeLimit: sizeLimit, checkpoints: checkpoints ? self.checkpoints : nil, md5: md5)
    } catch {
      release(id, keeping: nil)
      throw error
    }
  }

  /// What an append may begin from: not a final, at its offset, not completed.
  private static func check(_ upload: Upload, offset: Int64) throws {
    if upload.isFinal { throw UploadError.finalNotAppendable(id: upload.id) }
    guard offset == upload.offset else { throw UploadError.offsetMismatch(expected: upload.offset, actual: offset) }
    if upload.completedAt != nil { throw UploadError.exceedsLength(length: upload.length ?? upload.offset) }
  }

  /// Makes the bytes [`committed.offset`, `end`) durable (the data store) and commits `end`,
  /// the data store's state and a just-declared length, extending the expiry (and, under a
  /// catalog lease, the lease), if this append still holds the upload.
  func commit(
    _ session: UploadSession, committed: Upload, to end: Int64, length: Int64?, sha256: Digest?, finishing: Bool
  ) throws -> Upload {
    let id = committed.id
    let state = try discardingMisassembled(id) {
      try data.commit(session, id: id, to: end, sha256: sha256, finishing: finishing)
    }
    guard
      let expires = try table.commitOffset(
        id, from: committed.offset, to: end, length: length, state: state, expiry: expiry, lease: lease,
        hold: locker.hold(id))
    else {
      throw try table.exists(id) ? UploadError.locked(id: id) : UploadError.notFound(id: id)
    }
    data.committed(state, in: session, id: id)
    return Upload(
      id: id, bucket: committed.bucket, name: committed.name, owner: committed.owner, length: length, offset: end,
      metadata: committed.metadata, concat: committed.concat, expiresAt: expires, createdAt: committed.createdAt,
      completedAt: nil, dataState: state)
  }

  /// The last byte of a non-partial upload arrived: the data store stages it, after the row
  /// records what staging will change.
  func stage(_ session: UploadSession, upload: Upload, length: Int64, sha256: Digest?) throws -> StagedBlob {
    if let assembling = data.assembling(session) { try record(upload.id, assembling) }
    return try discardingMisassembled(upload.id) {
      try data.stage(session, upload: upload, length: length, sha256: sha256)
    }
  }

  /// Records the data store's `state` alone (the offset unchanged), under this append's lease.
  private func record(_ id: String, _ state: UploadDataState) throws {
    guard try table.record(id, state: state, hold: locker.hold(id)) else { throw UploadError.locked(id: id) }
  }

  /// Parts the store did not assemble as sent are never published: the data store removed its
  /// bytes, and the row goes (the client is told; gc collects a row that stays).
  private func discardingMisassembled<T>(_ id: String, _ body: () throws -> T) throws -> T {
    do {
      return try body()
    } catch UploadError.assemblyMismatch(let id) {
      larder.logger.bestEffort("delete the mis-assembled upload \(id) (gc collects it when it expires)") {
        try table.delete(id, unfinishedOnly: false, hold: locker.hold(id))
      }
      throw UploadError.assemblyMismatch(id: id)
    }
  }

  // MARK: - publishing

  /// Publishes a completed upload as its object and marks the upload completed, in one transaction.
  ///
  /// On failure the upload is rolled back to its last acknowledged offset (the client resends).
  /// `admission` is asked inside the write (see ``ObjectAdmission``); when it refuses, the upload
  /// and its bytes are deleted (``reject(_:)``) and its error is rethrown. `options` default to
  /// what the upload's metadata says (tus's `Upload-Metadata`); a protocol whose metadata carries
  /// more (Firebase's `cacheControl`, `contentEncoding`, custom metadata with any key) passes its own.
  /// - Throws: ``LarderError`` from the write path, ``UploadError/notFound(id:)``, what
  ///   `admission` throws.
  public func publish(
    _ completed: CompletedUpload, options: ObjectWriteOptions? = nil, admission: (any ObjectAdmission)? = nil
  ) throws -> StoredObject {
    let fresh = completed.settle()
    precondition(fresh, "publish of a settled upload")
    let upload = completed.upload
    let options = options ?? completed.objectOptions
    let refusal = Refusal(admission)
    // Shared mode: the lease is the upload's until its row says completed, and renewed while
    // the publish copies the assembled object (server-side, but minutes for GiBs). A final
    // concatenation's row was recorded when it was prepared, at offset 0.
    let hold = locker.hold(upload.id)
    do {
      guard let name = upload.name else {
        throw UploadError.invalidConcatenation("a partial upload is never published")
      }
      let object = try locker.whileRenewing(upload.id) {
        try larder.objects.put(
          ObjectPath(bucket: upload.bucket, name: name), staged: completed.staged, options: options,
          admission: admission == nil ? nil : refusal, keys: [.upload(id: upload.id)]
        ) { db in
          try table.complete(db, upload, from: completed.session?.offset, hold: completed.session == nil ? .slot : hold)
        }
      }
      if let session = completed.session {
        _ = try? data.purge(upload.id, state: data.state(of: session), background: true)
      }
      for lease in completed.leases { release(lease, keeping: nil) }
      return object
    } catch {
      completed.unsettle()
      // A final concatenation's row goes with it: say why first, for the owner's next look.
      if completed.session == nil { remember(upload, error) }
      if refusal.refused {
        reject(completed)
      } else {
        rollback(completed)
      }
      throw error
    }
  }

  /// Remembers whether the admission step refused, which deletes the upload rather than
  /// rolling it back for a resend.
  private final class Refusal: ObjectAdmission, @unchecked Sendable {
    let inner: (any ObjectAdmission)?
    /// Set on the publishing thread only, read after the write returns.
    var refused = false
    /// Forwarded: the store computes the MD5 before the write only when its admission step asks.
    var readsMD5: Bool { inner?.readsMD5 ?? false }
    init(_ inner: (any ObjectAdmission)?) { self.inner = inner }
    func admit(_ incoming: IncomingObject, replacing current: StoredObject?) throws {
      do {
        try inner?.admit(incoming, replacing: current)
      } catch {
        refused = true
        throw error
      }
    }
  }

  /// Refuses a completed upload (the policy said no): the upload and its bytes are deleted.
  public func reject(_ completed: CompletedUpload) {
    guard completed.settle() else { return }
    completed.staged.discard()
    guard let session = completed.session else { return abandon(completed.upload.id, leases: completed.leases) }
    larder.logger.bestEffort("delete refused upload \(completed.upload.id) (gc collects it when it expires)") {
      try table.delete(completed.upload.id, unfinishedOnly: false, hold: nil)
    }
    _ = try? data.purge(completed.upload.id, state: data.state(of: session), background: true)
    release(completed.upload.id, keeping: nil)
  }

  /// Returns a completed-but-unpublished upload to its last acknowledged offset.
  func rollback(_ completed: CompletedUpload) {
    guard completed.settle() else { return }
    completed.staged.discard()
    // A final concatenation has no bytes of its own to resume from: it is made again.
    guard completed.session != nil else { return abandon(completed.upload.id, leases: completed.leases) }
    // Drop the session, never touching the file: if the commit went through before the failure
    // it is linked into blobs/. Otherwise the next load truncates it to the recorded offset.
    release(completed.upload.id, keeping: nil)
  }

  // MARK: - termination

  /// Deletes an upload and its bytes (a published object stays), unless an append holds it: in
  /// this process, or (shared mode) on another node, whose catalog lease runs.
  /// - Throws: ``UploadError/notFound(id:)``, ``UploadError/expired(id:)``, ``UploadError/locked(id:)``.
  public func terminate(id: String, owner: String?) throws {
    _ = try upload(id: id, owner: owner)
    _ = try acquire(id)
    defer { release(id, keeping: nil) }
    guard let state = try table.terminate(id, owner: owner) else {
      throw try table.exists(id) ? UploadError.locked(id: id) : UploadError.notFound(id: id)
    }
    _ = try? data.purge(id, state: state, background: true)
  }

  // MARK: - leases

  /// Takes the upload's lease, returning its hot session if one is cached and how many leases
  /// this process had given back then.
  func acquire(_ id: String) throws(UploadError) -> (session: UploadSession?, released: UInt64) {
    let result: Result<(UploadSession?, UInt64), UploadError> = slots.withLock { slots in
      if slots.byID[id]?.busy == true { return .failure(.locked(id: id)) }
      let session = slots.byID[id]?.session
      slots.byID[id] = Slot(busy: true, session: nil, lastUsed: DispatchTime.now().uptimeNanoseconds)
      return .success((session, slots.released))
    }
    return try result.get()
  }

  /// Gives the lease back, caching `session` for the next append.
  func release(_ id: String, keeping session: UploadSession?) {
    locker.release(id)
    var evicted: [UploadSession] = []
    slots.withLock { slots in
      slots.released &+= 1
      guard let session else {
        slots.byID[id] = nil
        return
      }
      slots.byID[id] = Slot(busy: false, session: session, lastUsed: DispatchTime.now().uptimeNanoseconds)
      let idle = slots.byID.filter { !$0.value.busy && $0.value.session != nil }
      if idle.count > maxIdleSessions {
        for (key, slot) in idle.sorted(by: { $0.value.lastUsed < $1.value.lastUsed }).prefix(
          idle.count - maxIdleSessions)
        {
          if let s = slot.session { evicted.append(s) }
          slots.byID[key] = nil
        }
      }
    }
    evicted.removeAll()  // close their files outside the lock
  }

  /// Shared mode: removes staging files no session of this store uses and no other process
  /// holds (``UploadDataStore/sweepStagingFiles(_:)``). Checked under the slots' lock, so a
  /// session being loaded here meanwhile is never touched.
  func sweepStagingFiles() {
    data.sweepStagingFiles { id, body in
      slots.withLock { slots in if slots.byID[id] == nil { body() } }
    }
  }

  /// At most every ``stagingSweepInterval``, from uploads being created.
  func sweepStagingFilesIfDue() {
    let now = ContinuousClock.now
    let due = lastStagingSweep.withLock { last in
      guard now - last >= Self.stagingSweepInterval else { return false }
      last = now
      return true
    }
    if due { sweepStagingFiles() }
  }

  static let stagingSweepInterval: Duration = .seconds(600)

  /// Waits for the background removals queued so far (tests, and a service stopping: a
  /// multipart upload's abort dropped at exit is one gc can no longer name).
  public func waitForCleanup() { data.waitForCleanup() }

  /// How many uploads have a hot session cached (for tests).
  public var hotSessionCount: Int { slots.withLock { $0.byID.values.filter { $0.session != nil }.count } }

  // MARK: - metadata

  /// The object options an upload's metadata asks for: `filename`, `contentType` (or tus-js-client's
  /// `filetype`) and everything else but `name` as custom metadata.
  public static func objectOptions(metadata: [String: String]) -> ObjectWriteOptions {
    var custom = metadata
    let filename = custom.removeValue(forKey: "filename")
    let type = custom.removeValue(forKey: "contentType")
    let filetype = custom.removeValue(forKey: "filetype")
    custom.removeValue(forKey: "name")
    return ObjectWriteOptions(
      declaredContentType: (type ?? filetype).flatMap { $0.isEmpty ? nil : $0 },
      filename: filename.flatMap { $0.isEmpty ? nil : $0 }, metadata: custom)
  }

  /// Upload ids are 32 lower-case hex digits; anything else is never looked up (nor made a path).
  public static func isUploadID(_ id: String) -> Bool {
    id.utf8.count == 32 && id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
  }
}
