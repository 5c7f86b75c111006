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
/// One writer per upload: ``beginAppend(id:owner:offset:length:checksum:)`` takes the upload's
/// lease (in shared mode also a catalog lease that runs out, ``lease``) and throws
/// ``UploadError/locked(id:)`` while another append holds it. Hot uploads keep
/// their file open and their running digests in memory.
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
  private let slots = Mutex<[String: Slot]>([:])
  /// What locks an upload beyond this process: nothing, or a catalog lease (shared mode).
  let locker: any UploadLocker
  /// What a test changed about this store (production: nothing).
  let testHooks: UploadStoreTestHooks
  private let lastStagingSweep = Mutex(ContinuousClock.now)
  /// Shared mode: deletions of keys no row names any more, one at a time off the requests' path.
  let cleanup = DispatchQueue(label: "larder.uploads.cleanup")
  /// Where uploads' bytes wait between appends: this node's data directory, or shared between
  /// nodes (S3).
  let data: any UploadDataStore
  /// Why recent background concatenations failed (their rows are gone), for the client's next
  /// look; bounded, oldest forgotten first.
  private let failures = Mutex<[(id: String, owner: String?, error: any Error)]>([])
  /// Final uploads whose background concatenation has not yet recorded its outcome. A refusal
  /// at publish releases the final's lease before the thread can remember the error, so the
  /// lease alone would let a HEAD in between see "not running" and answer 410.
  private let concatenating = Mutex<Set<String>>([])
  static let maxRememberedFailures = 256

  private struct Slot {
    var busy: Bool
    var session: UploadSession?
    var lastUsed: UInt64
  }

  public convenience init(
    larder: Larder, expiry: Duration = .seconds(24 * 3600), maxIdleSessions: Int = 64,
    checkpoints: UploadCheckpoints? = .default, lease: Duration = .seconds(10)
  ) {
    self.init(
      larder: larder, expiry: expiry, maxIdleSessions: maxIdleSessions, checkpoints: checkpoints, lease: lease,
      testHooks: UploadStoreTestHooks())
  }

  init(
    larder: Larder, expiry: Duration = .seconds(24 * 3600), maxIdleSessions: Int = 64,
    checkpoints: UploadCheckpoints? = .default, lease: Duration = .seconds(10),
    testHooks: UploadStoreTestHooks
  ) {
    self.larder = larder
    self.lease = lease
    self.testHooks = testHooks
    // Chosen once, the locker by the data store: uploads whose bytes any node may continue are
    // locked by a catalog lease.
    data = Self.dataStore(of: larder, storage: testHooks.storage)
    locker = data.locker(for: larder, lease: lease, beforeRenewal: testHooks.beforeRenewal)
    self.expiry = expiry
    self.checkpoints = checkpoints
    self.maxIdleSessions = maxIdleSessions
    data.sweepStagingFiles(self, onlyIfDue: false)
  }

  var directory: String { larder.blobs.uploadsDirectory.path }

  /// This node's clock, for creation and completion dates. Expiries and leases are written
  /// and judged on the catalog's clock (``SQLDialect/nowMilliseconds``), so a node whose clock
  /// runs ahead never expires another node's upload in progress.
  func now() -> Date { Date() + testHooks.clockSkew.timeInterval }

  /// The SQL of an upload's new expiry: the catalog's now plus ``expiry`` (bound as `?`).
  static func expirySQL(_ db: Database) -> String { "\(db.dialect.nowMilliseconds) + ?" }
  func path(of id: String) -> String { "\(directory)/\(id)" }

  // MARK: - creation

  /// Creates an upload (`length` nil = deferred) and its empty file.
  /// - Throws: ``LarderError/invalidArgument(_:)`` (no name for a non-partial upload, bad metadata),
  ///   ``LarderError/invalidBucket(_:reason:)``, ``LarderError/invalidName(_:reason:)``.
  public func create(
    bucket: String, name: String?, owner: String?, length: Int64?, metadata: [String: String] = [:],
    partial: Bool = false
  ) throws -> Upload {
    data.sweepStagingFiles(self, onlyIfDue: true)
    try ObjectName.validateBucket(bucket)
    if let length, length < 0 { throw LarderError.invalidArgument("Upload-Length must not be negative") }
    if !partial {
      guard let name else {
        throw LarderError.invalidArgument("Upload-Metadata must carry the object's name as the key 'name'")
      }
      try ObjectName.validateName(name)
      try ObjectStore.validateMetadata(Self.objectOptions(metadata: metadata).metadata)
    }
    let id = SecureRandom.hexIdentifier(byteCount: 16)
    let now = now()
    let storedName = partial ? nil : name
    let concat: UploadConcat? = partial ? .partial : nil
    let file = path(of: id)
    let fd = open(file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else { throw LarderError.posix("create", file) }
    close(fd)
    let expiresAt: Date
    do {
      try POSIX.fsyncDirectory(directory)
      expiresAt = try larder.catalog.write { db in
        try db.row(
          """
          INSERT INTO uploads(id, bucket, name, owner, length, "offset", metadata, concat, expires_at, created_at)
          VALUES (?, ?, ?, ?, ?, 0, ?, ?, \(Self.expirySQL(db)), ?) RETURNING expires_at
          """,
          [
            id, bucket, storedName, owner, length, try ObjectStore.json(metadata), concat?.stored,
            expiry.milliseconds, now,
          ])?.date("expires_at") ?? now + expiry.timeInterval
      }
    } catch {
      unlink(file)
      throw error
    }
    return Upload(
      id: id, bucket: bucket, name: storedName, owner: owner, length: length, offset: 0,
      metadata: metadata, concat: concat, expiresAt: expiresAt, createdAt: now, completedAt: nil)
  }

  // MARK: - reading

  /// The upload, if `owner` may see it.
  /// - Throws: ``UploadError/notFound(id:)``, ``UploadError/expired(id:)``.
  public func upload(id: String, owner: String?) throws -> Upload {
    guard Self.isUploadID(id) else { throw UploadError.notFound(id: id) }
    let row = try larder.catalog.read(snapshot: false) { db in
      try db.row(
        """
        SELECT *, CASE WHEN expires_at < \(db.dialect.nowMilliseconds) THEN 1 ELSE 0 END AS expired_now
        FROM uploads WHERE id = ?
        """, [id])
    }
    guard let row else {
      if let failed = failures.withLock({ $0.last { $0.id == id } }), failed.owner.hasSameBytes(as: owner) {
        throw failed.error
      }
      throw UploadError.notFound(id: id)
    }
    let upload = Upload(row: row)
    // Bytes: a uid "K" must not pass for the owner "\u{212A}" (Kelvin), nor NFC for NFD.
    guard upload.owner.hasSameBytes(as: owner) else { throw UploadError.notFound(id: id) }
    guard row.int("expired_now") != 1 else { throw UploadError.expired(id: id) }
    return upload
  }

  // MARK: - appending

  /// Starts an append at `offset`, optionally declaring a deferred length. `sizeLimit` bounds the
  /// upload's total size while its length is still deferred. With `checkpoints` (and no
  /// `checksum`) a long append commits what it received as it goes (see ``UploadAppend``); a
  /// protocol whose clients resend a broken chunk whole (Firebase's) passes false. With `md5`
  /// (a protocol whose answer reports `md5Hash`) the MD5 is kept up as the bytes arrive, while
  /// every append of the upload asks for it.
  /// - Throws: ``UploadError`` (`notFound`, `expired`, `locked`, `offsetMismatch`, `invalidLength`,
  ///   `finalNotAppendable`, `exceedsLength` for a completed upload), I/O errors.
  public func beginAppend(
    id: String, owner: String?, offset: Int64, length declared: Int64? = nil, checksum: UploadChecksum? = nil,
    sizeLimit: Int64? = nil, checkpoints: Bool = true, md5: Bool = false
  ) throws -> UploadAppend {
    guard Self.isUploadID(id) else { throw UploadError.notFound(id: id) }
    // The owner first: a stranger never takes the lease, so never makes the owner's append
    // wait (423) nor drops its hot session. The owner of a row never changes.
    // A final upload is never appended to, even while its concatenation holds its lease.
    if case .final = try upload(id: id, owner: owner).concat { throw UploadError.finalNotAppendable(id: id) }
    let cached = try acquire(id)
    do {
      try locker.claim(id)
      // Read under the lease: only its holder moves the offset, so this one is current.
      let upload = try self.upload(id: id, owner: owner)
      if case .final = upload.concat { throw UploadError.finalNotAppendable(id: id) }
      guard offset == upload.offset else {
        throw UploadError.offsetMismatch(expected: upload.offset, actual: offset)
      }
      if upload.completedAt != nil { throw UploadError.exceedsLength(length: upload.length ?? upload.offset) }
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
      let session = try data.session(for: upload, cached: cached, self)
      return UploadAppend(
        upload: upload, length: length, store: self, session: session, checksum: checksum,
        sizeLimit: sizeLimit, checkpoints: checkpoints ? self.checkpoints : nil, md5: md5)
    } catch {
      release(id, keeping: nil)
      throw error
    }
  }

  /// Undoes a publish that linked the upload's file into `blobs/` and never committed (the
  /// process died between the link and the COMMIT, or the COMMIT failed and its cleanup did
  /// not run): the upload's row still has its old offset, and its bytes are in the file. Under
  /// the write lock, a blob file that is this very file and that no row records is unlinked,
  /// so the upload is resumable again. Hashing the file to find that name costs one read of it,
  /// once, on this rare path.
  func detachFromBlobs(_ id: String) throws {
    let file = path(of: id)
    guard let st = POSIX.lstat(file), st.st_nlink > 1 else { return }
    let sha = Digest(.sha256)
    do {
      try BlobReader(path: file).forEachChunk { sha.update($0) }
    } catch LarderError.io(_, _, ENOENT) {
      return
    }
    let digest = sha.finalize()
    let blob = larder.blobs.path(for: digest)
    try larder.catalog.write { db in
      guard try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [digest]) == nil,
        let linked = POSIX.lstat(blob), linked.st_ino == st.st_ino, linked.st_dev == st.st_dev
      else { return }
      if POSIX.unlink(blob) { try POSIX.fsyncDirectory((blob as NSString).deletingLastPathComponent) }
    }
  }

  /// Records a new acknowledged offset (and a just-declared length); extends the expiry.
  /// In shared mode, also records `shared` and renews the lease (on the catalog's clock), if
  /// this append still holds it: its token and its epoch.
  func commitOffset(_ upload: Upload, offset: Int64, length: Int64?, shared: SharedUploadState? = nil) throws
    -> Upload
  {
    let expires: Date = try larder.catalog.write { db in
      if let shared {
        let held = holdsLease(upload.id)
        let updated = try db.rows(
          """
          UPDATE uploads SET "offset" = ?, length = ?, expires_at = \(Self.expirySQL(db)), shared_state = ?,
            lease_until = \(db.dialect.nowMilliseconds) + ?
          WHERE id = ? AND "offset" = ? AND completed_at IS NULL AND \(held.sql) RETURNING expires_at
          """,
          [offset, length, expiry.milliseconds, shared.json, lease.milliseconds, upload.id, upload.offset]
            + held.arguments)
        guard updated.count == 1, let expires = updated[0].date("expires_at") else {
          let exists = try db.row("SELECT 1 FROM uploads WHERE id = ?", [upload.id]) != nil
          throw exists ? UploadError.locked(id: upload.id) : UploadError.notFound(id: upload.id)
        }
        return expires
      }
      let updated = try db.rows(
        """
        UPDATE uploads SET "offset" = ?, length = ?, expires_at = \(Self.expirySQL(db))
        WHERE id = ? AND "offset" = ? AND completed_at IS NULL RETURNING expires_at
        """, [offset, length, expiry.milliseconds, upload.id, upload.offset])
      guard updated.count == 1, let expires = updated[0].date("expires_at") else {
        throw UploadError.notFound(id: upload.id)
      }
      return expires
    }
    return Upload(
      id: upload.id, bucket: upload.bucket, name: upload.name, owner: upload.owner, length: length,
      offset: offset,
      metadata: upload.metadata, concat: upload.concat, expiresAt: expires, createdAt: upload.createdAt,
      completedAt: nil)
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
    // the publish copies the assembled object (server-side, but minutes for GiBs).
    let held = completed.session != nil ? locker.holding(upload.id) : nil
    do {
      guard let name = upload.name else {
        throw UploadError.invalidConcatenation("a partial upload is never published")
      }
      let object = try locker.whileRenewing(upload.id) {
        try larder.objects.put(
          ObjectPath(bucket: upload.bucket, name: name), staged: completed.staged, options: options,
          admission: admission == nil ? nil : refusal, keys: [.upload(id: upload.id)]
        ) { db in
          if completed.session == nil {
            // A final concatenation: its row was recorded when it was prepared.
            try db.execute(
              """
              UPDATE uploads SET "offset" = ?, completed_at = ? WHERE id = ? AND completed_at IS NULL
              """, [upload.offset, upload.completedAt, upload.id])
            guard db.changes == 1 else { throw UploadError.notFound(id: upload.id) }
          } else {
            try db.execute(
              """
              UPDATE uploads SET "offset" = ?, length = ?, completed_at = ?
              WHERE id = ? AND "offset" = ? AND completed_at IS NULL AND \(held?.sql ?? "1 = 1")
              """,
              [upload.offset, upload.length, upload.completedAt, upload.id, completed.session?.offset]
                + (held?.arguments ?? []))
            guard db.changes == 1 else {
              let exists = try held != nil && db.row("SELECT 1 FROM uploads WHERE id = ?", [upload.id]) != nil
              throw exists ? UploadError.locked(id: upload.id) : UploadError.notFound(id: upload.id)
            }
          }
        }
      }
      if let session = completed.session {
        unlink(path(of: upload.id))
        data.remove(upload.id, state: session.shared, self)
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
      try larder.catalog.write { db in
        try db.execute("DELETE FROM uploads WHERE id = ?", [completed.upload.id])
      }
    }
    unlink(path(of: completed.upload.id))
    data.remove(completed.upload.id, state: session.shared, self)
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
    let state = try larder.catalog.write { db in
      let unleased = locker.unleased(db)
      let rows = try db.rows(
        "DELETE FROM uploads WHERE id = ? AND owner IS NOT DISTINCT FROM ?\(unleased) RETURNING shared_state",
        [id, owner])
      guard rows.count == 1 else {
        let exists = try db.row("SELECT 1 FROM uploads WHERE id = ?", [id]) != nil
        throw exists ? UploadError.locked(id: id) : UploadError.notFound(id: id)
      }
      return SharedUploadState(json: rows[0].string("shared_state"))
    }
    unlink(path(of: id))
    data.remove(id, state: state, self)
  }

  // MARK: - concatenation

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
      for id in Set(parts.map(\.id)) { try data.checkPartial(parts.first(where: { $0.id == id })!, self) }
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
      let expiresAt = try larder.catalog.write { db in
        try db.row(
          """
          INSERT INTO uploads(
            id, bucket, name, owner, length, "offset", metadata, concat, expires_at, created_at, lease_holder, lease_until)
          VALUES (?, ?, ?, ?, ?, 0, ?, ?, \(Self.expirySQL(db)), ?, ?, \(lease == nil ? "?" : "\(db.dialect.nowMilliseconds) + ?"))
          RETURNING expires_at
          """,
          [
            final.id, bucket, name, owner, total, try ObjectStore.json(metadata),
            received ?? UploadConcat.final(ids).stored, expiry.milliseconds, now, lease?.token,
            lease.map { _ in self.lease.milliseconds },
          ])?.date("expires_at")
      }
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
        try data.readPartial(part, self) { chunk in
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
    if concatenating.withLock({ $0.contains(id) }) || slots.withLock({ $0[id]?.busy == true }) { return true }
    // Shared mode: another node's, while its lease runs by the catalog's clock.
    guard Self.isUploadID(id) else { return false }
    return locker.isLeasedElsewhere(id)
  }

  private func remember(_ upload: Upload, _ error: any Error) {
    failures.withLock { failures in
      failures.append((upload.id, upload.owner, error))
      if failures.count > Self.maxRememberedFailures { failures.removeFirst(failures.count - Self.maxRememberedFailures) }
    }
  }

  /// Deletes an unpublished final upload's row and gives back the leases it held.
  func abandon(_ id: String, leases: [String]) {
    larder.logger.bestEffort("delete unpublished final upload \(id) (gc collects it when it expires)") {
      try larder.catalog.write { db in
        try db.execute("DELETE FROM uploads WHERE id = ? AND completed_at IS NULL", [id])
      }
    }
    for lease in leases { release(lease, keeping: nil) }
  }

  // MARK: - leases

  /// Takes the upload's lease, returning its hot session if one is cached.
  func acquire(_ id: String) throws(UploadError) -> UploadSession? {
    let result: Result<UploadSession?, UploadError> = slots.withLock { slots in
      if slots[id]?.busy == true { return .failure(.locked(id: id)) }
      let session = slots[id]?.session
      slots[id] = Slot(busy: true, session: nil, lastUsed: DispatchTime.now().uptimeNanoseconds)
      return .success(session)
    }
    return try result.get()
  }

  /// Gives the lease back, caching `session` for the next append.
  func release(_ id: String, keeping session: UploadSession?) {
    locker.release(id)
    var evicted: [UploadSession] = []
    slots.withLock { slots in
      guard let session else {
        slots[id] = nil
        return
      }
      slots[id] = Slot(busy: false, session: session, lastUsed: DispatchTime.now().uptimeNanoseconds)
      let idle = slots.filter { !$0.value.busy && $0.value.session != nil }
      if idle.count > maxIdleSessions {
        for (key, slot) in idle.sorted(by: { $0.value.lastUsed < $1.value.lastUsed }).prefix(
          idle.count - maxIdleSessions)
        {
          if let s = slot.session { evicted.append(s) }
          slots[key] = nil
        }
      }
    }
    evicted.removeAll()  // close their files outside the lock
  }

  /// Shared mode: removes staging files no session of this store uses and no other process
  /// holds (each live one is `flock`ed by its session). They are caches: the bucket holds the
  /// bytes and the next append here rebuilds its file from the pieces. Without this, every node
  /// would keep a file for each upload that another node finished. Checked under the slots'
  /// lock, so a session being loaded here meanwhile is never touched.
  func sweepStagingFiles() {
    for name in POSIX.listDirectory(directory) where Self.isUploadID(name) {
      let file = path(of: name)
      slots.withLock { slots in
        guard slots[name] == nil else { return }
        let fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return }
        defer { close(fd) }
        if POSIX.tryLock(fd) { unlink(file) }
      }
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

  /// How many uploads have a hot session cached (for tests).
  public var hotSessionCount: Int { slots.withLock { $0.values.filter { $0.session != nil }.count } }

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
