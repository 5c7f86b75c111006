import Foundation
import LarderCrypto

/// Removes what nothing references any more, safely beside a running server (ARCHITECTURE §6).
///
/// ```swift
/// let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .seconds(86_400)))
/// print(report.blobsRemoved, report.bytesFreed)
/// ```
/// Safety rests on SQLite's single writer: every decision to delete is taken inside a
/// `BEGIN IMMEDIATE` transaction, the same lock under which an upload decides to dedupe against
/// an existing `blobs` row. A blob's file is renamed into `trash/` inside the transaction that
/// deletes its row and is unlinked only after the commit; a crash before the commit leaves the
/// row and a trash entry, which recovery (at the next open, or the next collection) puts back.
///
/// One collector runs at a time per data directory (`flock` on `gc.lock`); a second one gets
/// ``MaintenanceError/collectorBusy(lockPath:)`` at once.
public struct GarbageCollector: Sendable {
  public struct Options: Sendable {
    /// Unreferenced files younger than this are kept (an upload not yet attached by its app).
    public var grace: Duration
    /// Compute the report without changing anything.
    public var dryRun: Bool
    /// Blobs per write transaction: bounds both memory and how long the write lock is held.
    public var batchSize: Int
    /// Abandoned temp files younger than this are kept.
    public var tempAge: Duration
    public var progress: (@Sendable (GCProgress) -> Void)?

    public init(
      grace: Duration = .seconds(24 * 3600), dryRun: Bool = false, batchSize: Int = 500,
      tempAge: Duration = .seconds(60), progress: (@Sendable (GCProgress) -> Void)? = nil
    ) {
      self.grace = grace
      self.dryRun = dryRun
      self.batchSize = max(1, batchSize)
      self.tempAge = tempAge
      self.progress = progress
    }
  }

  public let larder: Larder

  public init(larder: Larder) { self.larder = larder }

  private var catalog: Catalog { larder.catalog }
  private var blobs: BlobStore { larder.blobs }
  private var backend: any BlobBackend { larder.blobBackend }
  /// Blobs in S3: deleted by fenced intents, no lock held across a DELETE (``BlobFences``).
  private var remote: Bool { !backend.publishesInsideTransaction }
  private var faults: FaultInjector { larder.files.faults }

  /// Files no object or attachment references, created before the cutoff.
  static let unreferencedFiles = """
    files.created_at < ? \
    AND NOT EXISTS (SELECT 1 FROM objects WHERE objects.file_id = files.id) \
    AND NOT EXISTS (SELECT 1 FROM attachments WHERE attachments.file_id = files.id) \
    AND NOT EXISTS (SELECT 1 FROM derived_files WHERE derived_files.file_id = files.id)
    """

  /// Runs one collection.
  /// - Throws: ``MaintenanceError/collectorBusy(lockPath:)`` if another collector runs,
  ///   ``DatabaseError`` or ``LarderError`` on failure (what was committed stays committed;
  ///   anything left in `trash/` is recovered by the next run or the next open).
  public func collect(options: Options = .init()) throws -> GCReport {
    let clock = ContinuousClock()
    let started = clock.now
    let lock = try CollectorLock.acquire(in: larder.directory, create: !options.dryRun, catalog: catalog)
    defer { lock?.release() }
    var report = GCReport(dryRun: options.dryRun, graceSeconds: Self.seconds(options.grace))
    let now = Date()
    let cutoff = now.addingTimeInterval(-Self.seconds(options.grace))

    options.progress?(.init(phase: .trash, processed: 0))
    if options.dryRun {
      report.trashRemoved = POSIX.listDirectory(blobs.trashDirectory.path).count
    } else {
      let (restored, removed) = try Recovery.recoverTrash(blobs: blobs, catalog: catalog)
      report.trashRestored = restored
      report.trashRemoved = removed
    }
    var mark = started
    func lap(_ phase: GCProgress.Phase) {
      let now = clock.now
      report.phaseSeconds[phase.rawValue] = Self.seconds(now - mark)
      mark = now
    }
    if remote && !options.dryRun {
      // Intents a collector committed and did not finish (it died, or its session did).
      report.deletionsResumed = try BlobDeletions.finishLeftovers(
        catalog: catalog, backend: backend, batchSize: options.batchSize)
    }
    lap(.trash)
    try expireUploads(now: now, options: options, report: &report)
    lap(.uploads)
    try releaseFiles(cutoff: cutoff, options: options, report: &report)
    lap(.files)
    if options.dryRun {
      try countOrphanBlobs(cutoff: cutoff, options: options, report: &report)
    } else if remote {
      try removeOrphanRemoteBlobs(options: options, report: &report)
    } else {
      try removeOrphanBlobs(options: options, report: &report)
    }
    lap(.blobs)
    if remote {
      try removeRemoteStrays(now: now, options: options, report: &report)
    } else {
      try removeStrays(options: options, report: &report)
    }
    lap(.strays)
    try removeAbandonedTemp(now: now, options: options, report: &report)
    lap(.temp)

    report.bytesFreed =
      report.uploadBytesFreed + report.blobBytesFreed + report.strayBytesFreed + report.tempBytesFreed
    report.durationSeconds = Self.seconds(clock.now - started)
    options.progress?(.init(phase: .done, processed: 0))
    return report
  }

  // MARK: 1. expired resumable uploads

  private func expireUploads(now: Date, options: Options, report: inout GCReport) throws {
    options.progress?(.init(phase: .uploads, processed: 0))
    let rows: [Row]
    if options.dryRun {
      rows = try catalog.read { db in try db.rows("SELECT id, shared_state FROM uploads WHERE expires_at < ?", [now]) }
    } else {
      rows = try catalog.write { db in
        try db.rows("DELETE FROM uploads WHERE expires_at < ? RETURNING id, shared_state", [now])
      }
    }
    let ids = rows.compactMap { $0.string("id") }
    report.uploadsExpired = ids.count
    guard !ids.isEmpty else { return }
    // In shared mode their bytes are in the bucket too (a store error leaves them to the
    // leftover pass of the next run).
    if !options.dryRun, let storage = larder.sharedUploads {
      for row in rows {
        guard let id = row.string("id"), UploadStore.isUploadID(id) else { continue }
        try? storage.removeUpload(id, state: SharedUploadState(json: row.string("shared_state")))
      }
    }
    // An upload's bytes are `uploads/<id>`. An id is never trusted as a path: one that is not
    // a plain name removes nothing.
    let directory = blobs.uploadsDirectory.path
    for id in Set(ids) where Self.isPlainName(id) {
      let path = "\(directory)/\(id)"
      let size = BlobTreeWalker.size(of: path)
      if options.dryRun || POSIX.unlink(path) { report.uploadBytesFreed += size }
    }
    if !options.dryRun { try? POSIX.fsyncDirectory(directory) }
  }

  static func isPlainName(_ name: String) -> Bool {
    !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.contains("\0")
      && !name.hasPrefix(".")
  }

  // MARK: 2. unreferenced files

  private func releaseFiles(cutoff: Date, options: Options, report: inout GCReport) throws {
    options.progress?(.init(phase: .files, processed: 0))
    if options.dryRun {
      report.filesReleased = try catalog.read { db in
        Int(
          try db.row("SELECT count(*) AS n FROM files WHERE \(Self.unreferencedFiles)", [cutoff])?.int("n")
            ?? 0)
      }
    } else {
      // Check and delete in one statement: an object or attachment inserted a moment earlier
      // is seen (the write lock orders us after it); one inserted later finds no file and fails
      // its foreign key instead of pointing at nothing. One batch per write transaction, so the
      // write lock is never held for long.
      while true {
        let released = try catalog.write { db in
          try db.execute(
            "DELETE FROM files WHERE id IN (SELECT id FROM files WHERE \(Self.unreferencedFiles) LIMIT ?)",
            [cutoff, options.batchSize])
          return db.changes
        }
        report.filesReleased += released
        if released > 0 { options.progress?(.init(phase: .files, processed: report.filesReleased)) }
        if released < options.batchSize { break }
      }
      // Derived files (image variants) go with their source, whatever their age: the source's
      // last file was released above, or earlier.
      report.filesReleased += try catalog.write { db in
        try db.execute("DELETE FROM files WHERE id IN (\(DerivedFiles.orphaned))")
        return db.changes
      }
      return
    }
    options.progress?(.init(phase: .files, processed: report.filesReleased))
  }

  // MARK: 3. blobs without files

  /// Up to `limit` blobs after `cursor` (in digest order) that no file references, read on a
  /// reader: candidates only, which the deleting transaction checks again under the write lock.
  private func orphanBlobCandidates(after cursor: [UInt8], limit: Int) throws -> [[UInt8]] {
    try catalog.read { db in
      try db.rows(
        """
        SELECT sha256 FROM blobs b WHERE sha256 > ?
        AND NOT EXISTS (SELECT 1 FROM files f WHERE f.blob_sha256 = b.sha256)
        ORDER BY sha256 LIMIT ?
        """, [cursor, limit]
      ).compactMap { $0.bytes("sha256") }
    }
  }

  /// Finds candidates on a reader (no write lock held while scanning), then rechecks and deletes
  /// each inside a short write transaction.
  private func removeOrphanBlobs(options: Options, report: inout GCReport) throws {
    var cursor: [UInt8] = []
    while true {
      let candidates = try orphanBlobCandidates(after: cursor, limit: options.batchSize)
      guard let last = candidates.last else { break }
      cursor = last
      let moved: [TrashEntry]
      do {
        moved = try trashBatch(candidates, report: &report)
      } catch {
        // A failed COMMIT leaves the rows but the files in trash/ (I1 broken): put them back
        // now, under the write lock, rather than at the next open. We hold gc.lock.
        _ = try? Recovery.recoverTrash(blobs: blobs, catalog: catalog)
        throw error
      }
      try faults.hit(.gcAfterCommit)
      // No fsync after the unlinks: an unlink lost in a crash leaves a trash entry whose row
      // is gone, which recovery removes. Under load every fsync costs a journal commit.
      for entry in moved { POSIX.unlink(entry.trash) }
      options.progress?(.init(phase: .blobs, processed: report.blobsRemoved))
    }
  }

  private struct TrashEntry {
    let trash: String
    let original: String
  }

  /// One write transaction: delete the rows still unreferenced, move their files to `trash/`.
  ///
  /// `candidates` are sorted; one statement deletes every blob of their range that no file
  /// uses (one that became unreferenced since the scan goes too, which is as right).
  private func trashBatch(_ candidates: [[UInt8]], report: inout GCReport) throws -> [TrashEntry] {
    guard let first = candidates.first, let last = candidates.last else { return [] }
    let trashDirectory = blobs.trashDirectory.path
    let (moved, removed, bytes) = try catalog.write { db -> ([TrashEntry], Int, Int64) in
      var moved: [TrashEntry] = []
      var bytes: Int64 = 0
      do {
        let rows = try db.rows(
          """
          DELETE FROM blobs WHERE sha256 >= ? AND sha256 <= ?
          AND NOT EXISTS (SELECT 1 FROM files WHERE files.blob_sha256 = blobs.sha256)
          RETURNING sha256, size
          """, [first, last])
        for (index, row) in rows.enumerated() {
          if index == rows.count / 2 && index > 0 { try faults.hit(.gcMidBatch) }
          guard let sha256 = row.bytes("sha256") else { continue }
          let hex = Hex.encode(sha256)
          let original = blobs.path(forHex: hex)
          let trash = "\(trashDirectory)/\(hex)"
          if POSIX.rename(original, trash) {
            moved.append(TrashEntry(trash: trash, original: original))
            bytes += row.int("size") ?? 0
          } else if errno != ENOENT {
            // Missing is fine (a quarantined blob); anything else must not commit the delete.
            throw LarderError.posix("rename", original)
          }
        }
        if !moved.isEmpty { try POSIX.fsyncDirectory(trashDirectory) }
        try faults.hit(.gcAfterTrash)
        return (moved, rows.count, bytes)
      } catch {
        // The rows come back with the rollback; so must the files, before anyone (an upload
        // deduping against a row) can look. We still hold the write lock.
        for entry in moved { POSIX.rename(entry.trash, entry.original) }
        throw error
      }
    }
    report.blobsRemoved += removed
    report.blobBytesFreed += bytes
    report.batches += 1
    return moved
  }

  /// The orphan blobs of an S3 store, per batch in two phases. A: one short write transaction
  /// deletes the rows still unreferenced (`RETURNING` their fences: each row is counted by the
  /// one collector whose DELETE removed it) and commits a deletion intent per address. B: with
  /// no transaction or lock open, the objects are DELETEd, then the intents. A collector that
  /// dies, or whose session or lock is lost, anywhere in B leaves intents for the next run; a
  /// writer meanwhile finds no row and uploads to a fresh fence, which none of these DELETEs
  /// (late, or repeated) can touch.
  private func removeOrphanRemoteBlobs(options: Options, report: inout GCReport) throws {
    var cursor: [UInt8] = []
    while true {
      let candidates = try orphanBlobCandidates(after: cursor, limit: options.batchSize)
      guard let first = candidates.first, let last = candidates.last else { break }
      cursor = last
      let (condemned, bytes) = try catalog.write { db -> ([BlobAddress], Int64) in
        let rows = try db.rows(
          """
          DELETE FROM blobs WHERE sha256 >= ? AND sha256 <= ?
          AND NOT EXISTS (SELECT 1 FROM files WHERE files.blob_sha256 = blobs.sha256)
          RETURNING sha256, size, fence
          """, [first, last])
        let addresses = rows.compactMap { row in
          row.bytes("sha256").map { BlobAddress(sha256: $0, fence: row.int("fence") ?? 0) }
        }
        try BlobDeletions.record(addresses, in: db)
        return (addresses, rows.reduce(0) { $0 + ($1.int("size") ?? 0) })
      }
      report.blobsRemoved += condemned.count
      report.blobBytesFreed += bytes
      report.batches += 1
      try faults.hit(.gcAfterTrash)
      try BlobDeletions.finish(condemned, catalog: catalog, backend: backend) { try faults.hit(.gcMidBatch) }
      try faults.hit(.gcAfterCommit)
      options.progress?(.init(phase: .blobs, processed: report.blobsRemoved))
    }
  }

  /// Stored addresses considered per stray batch.
  static let strayBatchSize = 500

  /// Objects of an S3 store that no row names (an upload whose commit never came, or one a
  /// row made redundant), older than `tempAge`. Only below the floor, which this run raises
  /// first (``BlobFences/raiseFloor(_:now:age:)``): no writer can commit such an address any
  /// more, so deleting it needs no lock. Each is condemned by an intent first, so two
  /// collectors never both count one.
  private func removeRemoteStrays(now: Date, options: Options, report: inout GCReport) throws {
    options.progress?(.init(phase: .strays, processed: 0))
    let age = Self.seconds(options.tempAge)
    let oldest = now.addingTimeInterval(-age)
    let floor =
      options.dryRun
      ? try catalog.read { db in try BlobFences.floor(db) } : try BlobFences.raiseFloor(catalog, now: now, age: age)
    var pending: [(address: BlobAddress, size: Int64)] = []
    func flush() throws {
      defer { pending.removeAll(keepingCapacity: true) }
      var strays = try BlobDeletions.strays(pending, floor: floor, catalog: catalog)
      if !options.dryRun { strays = try BlobDeletions.removeStrays(strays, catalog: catalog, backend: backend) }
      report.strayFilesRemoved += strays.count
      report.strayBytesFreed += strays.reduce(0) { $0 + $1.size }
    }
    try backend.forEachStoredBlob(dated: { address, size, stored in
      guard stored < oldest, address.fence < floor else { return }
      pending.append((address, size))
      if pending.count >= Self.strayBatchSize { try flush() }
    })
    if !pending.isEmpty { try flush() }
    options.progress?(.init(phase: .strays, processed: report.strayFilesRemoved))
  }

  private func countOrphanBlobs(cutoff: Date, options: Options, report: inout GCReport) throws {
    // What step 3 would remove once step 2 had run: blobs whose every file would be released.
    let row = try catalog.read { db in
      try db.row(
        """
        SELECT count(*) AS n, coalesce(sum(b.size), 0) AS bytes FROM blobs b WHERE NOT EXISTS (
          SELECT 1 FROM files WHERE files.blob_sha256 = b.sha256 AND NOT (\(Self.unreferencedFiles)))
        """, [cutoff])
    }
    report.blobsRemoved += Int(row?.int("n") ?? 0)
    report.blobBytesFreed += row?.int("bytes") ?? 0
    report.batches = (report.blobsRemoved + options.batchSize - 1) / options.batchSize
  }

  // MARK: 4. stray files under blobs/

  private func removeStrays(options: Options, report: inout GCReport) throws {
    options.progress?(.init(phase: .strays, processed: 0))
    var pending: [BlobTreeWalker.Entry] = []
    let walker = BlobTreeWalker(root: blobs.blobsDirectory.path)
    try walker.forEachUnreferenced(catalog: catalog) { unreferenced in
      pending.append(contentsOf: unreferenced)
      if pending.count >= options.batchSize {
        try trashStrays(pending, options: options, report: &report)
        pending.removeAll(keepingCapacity: true)
      }
    }
    if !pending.isEmpty { try trashStrays(pending, options: options, report: &report) }
    options.progress?(.init(phase: .strays, processed: report.strayFilesRemoved))
  }

  /// Rechecks candidates and unlinks the strays (``BlobTreeWalker/settleStrays``).
  private func trashStrays(_ candidates: [BlobTreeWalker.Entry], options: Options, report: inout GCReport)
    throws
  {
    let strays = try BlobTreeWalker.settleStrays(
      candidates, catalog: catalog, remove: !options.dryRun, lock: !options.dryRun)
    for stray in strays where options.dryRun ? stray.removable : stray.removed {
      report.strayFilesRemoved += 1
      report.strayBytesFreed += stray.size
    }
  }

  // MARK: 5. abandoned temp files

  private func removeAbandonedTemp(now: Date, options: Options, report: inout GCReport) throws {
    options.progress?(.init(phase: .temp, processed: 0))
    let directory = blobs.tmpDirectory.path
    let oldest = now.addingTimeInterval(-Self.seconds(options.tempAge))
    for name in POSIX.listDirectory(directory) {
      let path = "\(directory)/\(name)"
      guard let info = BlobTreeWalker.sizeAndModified(of: path), info.modified < oldest else { continue }
      if Recovery.abandoned(path, remove: !options.dryRun) {
        report.tempFilesRemoved += 1
        report.tempBytesFreed += info.size
      }
    }
    // Partial-upload files whose row never committed (a crash between creating the file and
    // inserting the row), past the same age so an upload being created is never touched. The
    // ids are read once, after the listing: a row committed meanwhile is seen.
    let uploads = blobs.uploadsDirectory.path
    let names = POSIX.listDirectory(uploads)
    let storage = larder.sharedUploads
    guard !names.isEmpty || storage != nil else { return }
    // In shared mode, what the bucket holds under `uploads/` is listed first, for the same check.
    var stored: [(id: String, newest: Date)] = []
    try storage?.forEachStoredUpload { id, newest in stored.append((id, newest)) }
    let known = try catalog.read { db in
      var ids: Set<String> = []
      try db.forEachRow("SELECT id FROM uploads") { if let id = $0.string("id") { ids.insert(id) } }
      return ids
    }
    if let storage {
      // Keys of uploads whose row is gone: a node that died between storing and committing, or
      // a removal that failed. Past the grace period only: an upload being created has its
      // row before its first key, but the listing above may predate both.
      for (id, newest) in stored where !known.contains(id) && newest < oldest && UploadStore.isUploadID(id) {
        if !options.dryRun { try storage.removeUpload(id, state: nil) }
        report.tempFilesRemoved += 1
      }
    }
    for name in names where Self.isPlainName(name) && !known.contains(name) {
      let path = "\(uploads)/\(name)"
      guard let info = BlobTreeWalker.sizeAndModified(of: path), info.modified < oldest else { continue }
      if options.dryRun || POSIX.unlink(path) {
        report.tempFilesRemoved += 1
        report.tempBytesFreed += info.size
      }
    }
  }

  static func seconds(_ duration: Duration) -> Double {
    duration.timeInterval
  }
}
