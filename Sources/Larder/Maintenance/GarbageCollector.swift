import Foundation
import LarderCrypto

/// Removes what nothing references any more, safely beside a running server (ARCHITECTURE.md,
/// "Garbage collection and verification").
///
/// ```swift
/// let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .seconds(86_400)))
/// print(report.blobsRemoved, report.bytesFreed)
/// ```
/// Safety rests on SQLite's single writer: every decision to delete is taken inside a
/// `BEGIN IMMEDIATE` transaction, the same lock under which an upload decides to dedupe against
/// an existing `blobs` row. On PostgreSQL the deleting batch holds each candidate's content key
/// (``WriteKey``), which the deduping upload holds too (ARCHITECTURE.md, "Keyed write locks"). A
/// blob's file is renamed into `trash/` inside the transaction that deletes its row and is unlinked
/// only after the commit; a crash before the commit leaves the
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
  /// This machine's clock: the grace period's cutoff and temp files' ages (uploads expire on
  /// the catalog's). Tests give a clock that runs ahead.
  let now: @Sendable () -> Date

  /// The statements on `uploads` and the uploads' data store: expired uploads and leftovers
  /// are removed through them, as an upload store removes its own.
  let uploads: any UploadTable
  let uploadData: any UploadDataStore

  public init(larder: Larder) { self.init(larder: larder, now: { Date() }) }

  init(larder: Larder, now: @escaping @Sendable () -> Date, uploads: (any UploadTable)? = nil) {
    self.larder = larder
    self.now = now
    self.uploads = uploads ?? CatalogUploadTable(catalog: larder.catalog)
    uploadData = UploadStore.dataStore(of: larder, storage: larder.sharedUploads, locker: ProcessUploadLocker())
  }

  private var catalog: Catalog { larder.catalog }
  private var blobs: BlobStore { larder.blobs }
  private var content: any ContentStore { larder.content }
  private var faults: FaultInjector { larder.files.faults }

  /// Files no object or attachment references, created before the cutoff.
  static let unreferencedFiles = "files.created_at < ? AND \(unused)"

  /// Files no object, attachment or derivation refers to, whatever their age.
  static let unused = """
    NOT EXISTS (SELECT 1 FROM objects WHERE objects.file_id = files.id) \
    AND NOT EXISTS (SELECT 1 FROM attachments WHERE attachments.file_id = files.id) \
    AND NOT EXISTS (SELECT 1 FROM derived_files WHERE derived_files.file_id = files.id)
    """

  /// Derived files (image variants) released with their source: those whose source has no
  /// file left that step 2 keeps (a referenced or a young one). After step 2 (which released
  /// them) none; in a dry run (which released nothing), those step 2 would release. One query
  /// for both, so a dry run counts what a run releases. Takes the cutoff once.
  static let releasedVariants = """
    SELECT d.file_id FROM derived_files d WHERE NOT EXISTS (\
    SELECT 1 FROM files WHERE files.blob_sha256 = d.source_sha256 \
    AND NOT EXISTS (SELECT 1 FROM derived_files x WHERE x.file_id = files.id) \
    AND NOT (\(unreferencedFiles)))
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
    let now = now()
    let cutoff = now.addingTimeInterval(-Self.seconds(options.grace))

    options.progress?(.init(phase: .trash, processed: 0))
    // What a collection that died left (trash entries, deletion intents): settled first, so its
    // bytes are not judged strays or missing below.
    let recovered = try content.recover(dryRun: options.dryRun)
    report.trashRestored = recovered.restored.count
    report.trashRemoved = recovered.removed.count
    report.deletionsResumed = recovered.finished.count
    var mark = started
    func lap(_ phase: GCProgress.Phase) {
      let now = clock.now
      report.phaseSeconds[phase.rawValue] = Self.seconds(now - mark)
      mark = now
    }
    lap(.trash)
    try expireUploads(options: options, report: &report)
    lap(.uploads)
    try countHeldByGrace(cutoff: cutoff, report: &report)
    try releaseFiles(cutoff: cutoff, options: options, report: &report)
    lap(.files)
    try removeOrphanBlobs(cutoff: cutoff, options: options, report: &report)
    lap(.blobs)
    try removeStrays(now: now, options: options, report: &report)
    lap(.strays)
    try removeAbandonedTemp(now: now, options: options, report: &report)
    lap(.temp)

    report.bytesFreed =
      report.uploadBytesFreed + report.blobBytesFreed + report.strayBytesFreed + report.tempBytesFreed
    report.durationSeconds = Self.seconds(clock.now - started)
    options.progress?(.init(phase: .done, processed: 0))
    // Best effort: the collection has committed; failing to note it (a full disk) must not report it failed.
    if !options.dryRun { try? larder.recordCollection(report) }
    return report
  }

  // MARK: 1. expired resumable uploads

  private func expireUploads(options: Options, report: inout GCReport) throws {
    options.progress?(.init(phase: .uploads, processed: 0))
    // On the catalog's clock, which wrote the expiries: this machine's may run ahead of the
    // node whose upload is in progress.
    let expired = try uploads.expire(dryRun: options.dryRun)
    report.uploadsExpired = expired.count
    guard !expired.isEmpty else { return }
    // Their data store removes what it keeps: the staging file, and in shared mode the S3
    // parts and pieces (a store error leaves them to the leftover pass of the next run).
    // An id is never trusted as a path: one that is not a plain name removes nothing.
    for (id, state) in expired where Self.isPlainName(id) {
      if options.dryRun {
        report.uploadBytesFreed += uploadData.stagedBytes(id)
      } else {
        report.uploadBytesFreed += (try? uploadData.purge(id, state: state, background: false)) ?? 0
      }
    }
    if !options.dryRun { try? POSIX.fsyncDirectory(blobs.uploadsDirectory.path) }
  }

  static func isPlainName(_ name: String) -> Bool {
    !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.contains("\0")
      && !name.hasPrefix(".")
  }

  // MARK: 2. unreferenced files

  /// Unused files the grace period keeps this time (uploaded after the cutoff): what an
  /// operator asks when a collection frees less than expected.
  private func countHeldByGrace(cutoff: Date, report: inout GCReport) throws {
    let row = try catalog.read { db in
      try db.row(
        "SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM files WHERE files.created_at >= ? AND \(Self.unused)",
        [cutoff])
    }
    report.filesHeldByGrace = Int(row?.int("n") ?? 0)
    report.bytesHeldByGrace = row?.int("bytes") ?? 0
  }

  private func releaseFiles(cutoff: Date, options: Options, report: inout GCReport) throws {
    options.progress?(.init(phase: .files, processed: 0))
    if options.dryRun {
      (report.filesReleased, report.variantsReleased) = try catalog.read { db in
        let files = try db.row("SELECT count(*) AS n FROM files WHERE \(Self.unreferencedFiles)", [cutoff])
        let variants = try db.row("SELECT count(*) AS n FROM (\(Self.releasedVariants)) v", [cutoff])
        return (Int(files?.int("n") ?? 0), Int(variants?.int("n") ?? 0))
      }
      report.filesReleased += report.variantsReleased
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
      report.variantsReleased = try catalog.write { db in
        try db.execute("DELETE FROM files WHERE id IN (\(DerivedFiles.orphaned))")
        return db.changes
      }
      report.filesReleased += report.variantsReleased
      return
    }
    options.progress?(.init(phase: .files, processed: report.filesReleased))
  }

  // MARK: 3. blobs without files

  /// Blobs whose every file is unreferenced and older than the cutoff, or a variant released with
  /// its source (``releasedVariants``): after step 2 (which
  /// released those files), blobs with no file at all; in a dry run (which released nothing),
  /// what step 2 would have left so. One query for both, so a dry run reports what a run does.
  static let orphanBlobs = """
    NOT EXISTS (SELECT 1 FROM files WHERE files.blob_sha256 = b.sha256 AND NOT (\(unreferencedFiles)) \
    AND files.id NOT IN (\(releasedVariants)))
    """

  /// Up to `limit` orphan blobs after `cursor` (in digest order), read on a reader: candidates
  /// only, which the deleting transaction checks again under the write lock. Takes the cutoff twice.
  private func orphanBlobCandidates(after cursor: [UInt8], cutoff: Date, limit: Int) throws
    -> [(sha256: [UInt8], size: Int64)]
  {
    try catalog.read { db in
      try db.rows(
        "SELECT sha256, size FROM blobs b WHERE sha256 > ? AND \(Self.orphanBlobs) ORDER BY sha256 LIMIT ?",
        [cursor, cutoff, cutoff, limit]
      ).compactMap { row in row.bytes("sha256").map { ($0, row.int("size") ?? 0) } }
    }
  }

  /// Finds candidates on a reader (no write lock held while scanning); the content store
  /// rechecks and deletes each batch in a short write transaction (``ContentStore``). A dry
  /// run counts the same batches instead.
  private func removeOrphanBlobs(cutoff: Date, options: Options, report: inout GCReport) throws {
    var cursor: [UInt8] = []
    while true {
      let candidates = try orphanBlobCandidates(after: cursor, cutoff: cutoff, limit: options.batchSize)
      guard let last = candidates.last?.sha256 else { break }
      cursor = last
      let (removed, bytes) =
        options.dryRun
        ? (candidates.count, candidates.reduce(0) { $0 + $1.size })
        : try content.removeUnreferenced(candidates.map(\.sha256), faults: faults)
      report.blobsRemoved += removed
      report.blobBytesFreed += bytes
      report.batches += 1
      options.progress?(.init(phase: .blobs, processed: report.blobsRemoved))
    }
  }

  // MARK: 4. stored content no row names

  /// Strays older than the temp age where a commit may be on its way (``ContentStore``); a dry
  /// run counts those a run would remove.
  private func removeStrays(now: Date, options: Options, report: inout GCReport) throws {
    options.progress?(.init(phase: .strays, processed: 0))
    let oldest = now.addingTimeInterval(-Self.seconds(options.tempAge))
    try content.forEachStray(olderThan: oldest, remove: !options.dryRun) { strays in
      for stray in strays where options.dryRun ? stray.removable : stray.removed {
        report.strayFilesRemoved += 1
        report.strayBytesFreed += stray.size
      }
    }
    options.progress?(.init(phase: .strays, processed: report.strayFilesRemoved))
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
    // What the uploads' data store keeps (staging files; the bucket's `uploads/` in shared
    // mode) for rows that never committed (a crash between creating the file and inserting the
    // row) or are gone (a node that died between storing and committing, a removal that
    // failed), past the same age so an upload being created is never touched: it has its row
    // before its first key, but the listing may predate both. The ids are read once, after the
    // listing: a row committed meanwhile is seen.
    var stored: [(id: String, newest: Date, bytes: Int64)] = []
    try uploadData.forEachStored { id, newest, bytes in stored.append((id, newest, bytes)) }
    guard !stored.isEmpty else { return }
    let known = try uploads.allIDs()
    for (id, newest, bytes) in stored where !known.contains(id) && newest < oldest {
      if !options.dryRun { try uploadData.purge(id, state: .none, background: false) }
      report.tempFilesRemoved += 1
      report.tempBytesFreed += bytes
    }
  }

  static func seconds(_ duration: Duration) -> Double {
    duration.timeInterval
  }
}
