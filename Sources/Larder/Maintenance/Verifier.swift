import Foundation
import LarderCrypto

/// Checks every invariant (ARCHITECTURE.md, "Invariants and the write path") on a data directory,
/// and optionally repairs.
///
/// ```swift
/// let report = try Verifier(larder: larder).verify(repair: false)
/// if !report.isClean { for finding in report.findings { print(finding.kind, finding.detail) } }
/// ```
/// Every blob is re-hashed, streaming, one at a time (flat memory). Catalog rows are read in
/// short pages so a long verification never pins an old WAL snapshot beside a busy server.
///
/// Repair, and why it takes this shape:
/// - A corrupt blob (wrong hash or size, or not a regular file) moves to `quarantine/<hex>` and
///   every `files` row of it gets `quarantined = 1`, in one write transaction. The `blobs` row
///   stays: the files still refer to it (`ON DELETE RESTRICT`), and their owners (objects,
///   attachments) must keep existing so a download answers
///   ``LarderError/corruptContent(sha256:)`` instead of wrong bytes or a vanished name. When the
///   files go, the collector removes the row as usual. The quarantined file is kept for a human.
/// - A missing blob file gets the same marking (the content is lost; say so clearly); a missing
///   one with no files left just loses its row.
/// - Wrong permissions are set back to 0444; strays, abandoned temp files and leftover trash
///   are removed (trash goes back first if its row exists), each rechecked under the write lock.
/// - Foreign-key and `integrity_check` failures are reported only: no automatic fix is safe.
///
/// Verification holds `gc.lock`, so it never races a collection (it gets
/// ``MaintenanceError/collectorBusy(lockPath:)`` while one runs). Uploads may go on.
public struct Verifier: Sendable {
  public let larder: Larder
  /// Whether blobs in S3 are downloaded and re-hashed; otherwise each row's object is checked
  /// to exist with its size (a HEAD). Local blob files are always re-hashed.
  public var deep: Bool

  public init(larder: Larder, deep: Bool = true) {
    self.larder = larder
    self.deep = deep
  }

  private var catalog: Catalog { larder.catalog }
  private var blobs: BlobStore { larder.blobs }
  private var content: any ContentStore { larder.content }

  /// Runs every check.
  /// - Parameters:
  ///   - repair: fix what can be fixed safely (see the type's documentation).
  ///   - progress: called every 1000 blobs or 64 MiB hashed, and once at the end.
  /// - Throws: ``MaintenanceError/collectorBusy(lockPath:)``, ``DatabaseError``, ``LarderError``.
  public func verify(repair: Bool = false, progress: (@Sendable (VerifyProgress) -> Void)? = nil) throws
    -> VerifyReport
  {
    let clock = ContinuousClock()
    let started = clock.now
    // Always created: without the lock a collection starting now could race even a plain check
    // (its trash would look like leftovers, its removed blobs like missing files).
    let lock = try CollectorLock.acquire(in: larder.directory, create: true, catalog: catalog)
    defer { lock?.release() }
    var report = VerifyReport(repair: repair)
    // What a collection that died left, first: a blob it moved aside goes back before its
    // address is checked (not reported, or repaired, as missing), and deletions it committed
    // are carried out before anything is judged a stray.
    try checkLeftovers(repair: repair, &report)
    try checkCatalog(&report)
    try checkBlobs(repair: repair, progress: progress, &report)
    try checkStrays(repair: repair, &report)
    checkTemp(repair: repair, &report)
    try findDamagedObjects(&report)
    report.durationSeconds = GarbageCollector.seconds(clock.now - started)
    return report
  }

  // MARK: catalog

  private func checkCatalog(_ report: inout VerifyReport) throws {
    try catalog.read { db in
      // The engine's own checks (SQLite's integrity and foreign-key checks; none on
      // PostgreSQL, which enforces every foreign key at once); the size check below is ours.
      for problem in try catalog.engine.integrityProblems(db) {
        switch problem {
        case .corrupt(let line): report.add(.init(kind: .integrity, detail: line))
        case .danglingReference(let table, let parent):
          report.add(.init(kind: .foreignKey, detail: "a row of \(table) refers to a missing row of \(parent)"))
        }
      }
      for row in try db.rows(
        "SELECT f.id, f.size AS fsize, b.size AS bsize, f.blob_sha256 FROM files f JOIN blobs b ON b.sha256 = f.blob_sha256 WHERE f.size != b.size"
      ) {
        report.add(
          .init(
            kind: .fileSizeMismatch, sha256: row.bytes("blob_sha256").map(Hex.encode),
            detail:
              "file \(row.string("id") ?? "?") says \(row.int("fsize") ?? -1) bytes, its blob \(row.int("bsize") ?? -1)"
          ))
      }
    }
  }

  // MARK: blobs

  private func checkBlobs(
    repair: Bool, progress: (@Sendable (VerifyProgress) -> Void)?, _ report: inout VerifyReport
  )
    throws
  {
    let (total, totalBytes) = try catalog.read { db in
      let row = try db.row("SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM blobs")
      return (Int(row?.int("n") ?? 0), row?.int("bytes") ?? 0)
    }
    var cursor: [UInt8] = []
    // One read buffer for the whole run: most blobs are small, and a fresh buffer per blob
    // would cost more than hashing them.
    var buffer = [UInt8](repeating: 0, count: 1024 * 1024)
    var reported: Int64 = 0
    while true {
      let page: [([UInt8], Int64, [UInt8]?, Int64)] = try catalog.read { db in
        try db.rows(
          "SELECT sha256, size, md5, fence FROM blobs WHERE sha256 > ? ORDER BY sha256 LIMIT 1000", [cursor]
        ).map {
          ($0.bytes("sha256") ?? [], $0.int("size") ?? 0, $0.bytes("md5"), $0.int("fence") ?? 0)
        }
      }
      guard let last = page.last else { break }
      cursor = last.0
      for (sha256, size, md5, fence) in page {
        try checkBlob(
          BlobAddress(sha256: sha256, fence: fence), size: size, md5: md5, repair: repair, buffer: &buffer, &report)
        report.blobsChecked += 1
        // Throttled: a terminal line per blob would cost more than hashing small blobs.
        if report.blobsChecked % 1000 == 0 || report.bytesHashed - reported >= 64 << 20 {
          reported = report.bytesHashed
          progress?(
            .init(
              blobsChecked: report.blobsChecked, blobsTotal: total, bytesHashed: report.bytesHashed,
              bytesTotal: totalBytes))
        }
      }
    }
    progress?(
      .init(
        blobsChecked: report.blobsChecked, blobsTotal: total, bytesHashed: report.bytesHashed,
        bytesTotal: totalBytes))
  }

  /// A row's bytes: there with the row's size, and (locally always, remotely with `deep`) hashing
  /// to its address and recorded MD5. Repair quarantines corrupt content
  /// (``ContentStore/quarantine(_:)``), forgets a wrong MD5, and sets a blob file back to 0444.
  private func checkBlob(
    _ address: BlobAddress, size: Int64, md5: [UInt8]?, repair: Bool, buffer: inout [UInt8],
    _ report: inout VerifyReport
  ) throws {
    let (sha256, hex, place) = (address.sha256, address.hex, content.place(of: address))
    guard let stored = try content.inspect(address) else {
      // A writer healing a quarantine may have moved the row to a new fence since the page was
      // read (or gc took it): only a row that still names this address is missing its bytes.
      let current = try catalog.read(snapshot: false) { db in
        try db.row("SELECT fence FROM blobs WHERE sha256 = ?", [sha256])?.int("fence")
      }
      guard current == address.fence else { return }
      try checkMissing(address, repair: repair, &report)
      return
    }
    var problem: (VerifyReport.Finding.Kind, String)?
    if !stored.isRegular {
      problem = (.notRegularFile, "not a regular file (mode \(String(stored.mode ?? 0, radix: 8)))")
    } else if stored.size != size {
      problem = (.sizeMismatch, "stored content has \(stored.size) bytes, row says \(size)")
    } else if let actual = try content.digest(address, md5: md5 != nil, deep: deep, buffer: &buffer) {
      report.bytesHashed += actual.bytes
      if actual.sha256 != sha256 {
        problem = (.hashMismatch, "content hashes to \(Hex.encode(actual.sha256))")
      } else if let md5, let actualMD5 = actual.md5, md5 != actualMD5 {
        // The content is right (its address says so); only the recorded MD5 is wrong.
        let repaired = repair ? try clearMD5(sha256: sha256, recorded: md5) : false
        report.add(
          .init(
            kind: .md5Mismatch, sha256: hex, path: place,
            detail: "content's MD5 is \(Hex.encode(actualMD5)), row says \(Hex.encode(md5))", repaired: repaired))
      }
    }
    if let (kind, detail) = problem {
      let repaired = repair ? try content.quarantine(address) : false
      if repaired {
        report.quarantinedBlobs += 1
        report.quarantinedNow += 1
      } else if report.damagedContent.count < VerifyReport.maxFindings {
        report.damagedContent.append(hex)
      }
      report.add(.init(kind: kind, sha256: hex, path: place, detail: detail, repaired: repaired))
      return
    }
    if let mode = stored.mode, mode != 0o444 {
      report.add(
        .init(
          kind: .badPermissions, sha256: hex, path: place, detail: "mode \(String(mode, radix: 8)), expected 444",
          repaired: repair && content.restoreReadOnly(address)))
    }
  }

  /// Forgets a wrong MD5 (only if it is still the one found), so the backfill computes it again.
  private func clearMD5(sha256: [UInt8], recorded: [UInt8]) throws -> Bool {
    try catalog.write { db in
      try db.execute("UPDATE blobs SET md5 = NULL WHERE sha256 = ? AND md5 = ?", [sha256, recorded])
      return db.changes > 0
    }
  }

  /// A row without its bytes: explained by a quarantine, or lost. Repair checks again before
  /// its write transaction (no remote call under the lock) and inside it
  /// (``ContentStore/isStillMissingUnderLock(_:)``), where the row must still name the address
  /// (a writer may have healed it); a row no file needs just goes, else its files are marked.
  private func checkMissing(_ address: BlobAddress, repair: Bool, _ report: inout VerifyReport) throws {
    let sha256 = address.sha256
    let quarantined = try catalog.read { db in
      try db.row("SELECT 1 FROM files WHERE blob_sha256 = ? AND quarantined = 1", [sha256]) != nil
    }
    if quarantined {
      report.quarantinedBlobs += 1
      return
    }
    var repaired = false
    if repair {
      let missingBefore = try content.inspect(address) == nil
      var marked = false
      repaired = try catalog.write { db in
        guard missingBefore,
          try db.row("SELECT 1 FROM blobs WHERE sha256 = ? AND fence = ?", [sha256, address.fence]) != nil,
          content.isStillMissingUnderLock(address)
        else { return true }
        if try !ContentQuarantine.dropIfUnused(sha256, in: db) {
          try db.execute("UPDATE files SET quarantined = 1 WHERE blob_sha256 = ?", [sha256])
          marked = true
        }
        return true
      }
      if marked {
        report.quarantinedBlobs += 1
        report.quarantinedNow += 1
      }
    }
    if !repaired, report.damagedContent.count < VerifyReport.maxFindings { report.damagedContent.append(address.hex) }
    report.add(
      .init(
        kind: .missingBlobFile, sha256: address.hex, path: content.place(of: address),
        detail: content.missingDescription, repaired: repaired))
  }

  // MARK: damaged objects

  /// The objects whose content is quarantined, or was found damaged by this run (without
  /// repair), by bucket and name: what an operator must re-upload.
  private func findDamagedObjects(_ report: inout VerifyReport) throws {
    let found: [(VerifyReport.DamagedObject, Int)] = try catalog.read { [report] db in
      let columns = "o.bucket, o.name, f.blob_sha256, f.quarantined"
      let from = "FROM objects o JOIN files f ON f.id = o.file_id"
      var rows = try db.rows(
        "SELECT \(columns) \(from) WHERE f.quarantined = 1 ORDER BY o.bucket, o.name LIMIT ?",
        [VerifyReport.maxFindings])
      var total = Int(try db.row("SELECT count(*) AS n \(from) WHERE f.quarantined = 1")?.int("n") ?? 0)
      for sha256 in report.damagedContent.compactMap(Hex.decode) {
        let more = try db.rows(
          "SELECT \(columns) \(from) WHERE f.blob_sha256 = ? AND f.quarantined = 0 ORDER BY o.bucket, o.name", [sha256])
        total += more.count
        rows += more
      }
      return rows.prefix(VerifyReport.maxFindings).map { row in
        (
          VerifyReport.DamagedObject(
            bucket: row.string("bucket") ?? "", name: row.string("name") ?? "",
            sha256: row.bytes("blob_sha256").map(Hex.encode) ?? "", quarantined: row.int("quarantined") == 1),
          total
        )
      }
    }
    report.damagedObjects = found.map(\.0).sorted { ($0.bucket, $0.name) < ($1.bucket, $1.name) }
    report.damagedObjectCount = found.first?.1 ?? 0
  }

  // MARK: stored content without rows

  /// Every stray is reported; with repair, those removable now are removed (rechecked under
  /// the write lock, or condemned by intents below the fence floor, ``ContentStore``).
  private func checkStrays(repair: Bool, _ report: inout VerifyReport) throws {
    try content.forEachStray(olderThan: Date().addingTimeInterval(-Self.tempAge), remove: repair) { strays in
      for stray in strays {
        report.add(
          .init(
            kind: .strayBlobFile, sha256: stray.hex, path: stray.place, detail: stray.detail, repaired: stray.removed,
            reclaimable: stray.reclaimable))
      }
    }
  }

  // MARK: temp and trash

  /// Temp files younger than this are not judged: a writer between `open(O_EXCL)` and its
  /// `flock` holds no lock yet (the collector's default ``GarbageCollector/Options/tempAge``).
  static let tempAge: TimeInterval = 60

  private func checkTemp(repair: Bool, _ report: inout VerifyReport) {
    let directory = blobs.tmpDirectory.path
    let oldest = Date().addingTimeInterval(-Self.tempAge)
    for name in POSIX.listDirectory(directory) {
      let path = "\(directory)/\(name)"
      guard let modified = POSIX.modificationTime(path), modified < oldest,
        Recovery.abandoned(path, remove: repair)
      else { continue }
      report.add(
        .init(kind: .abandonedTemp, path: path, detail: "no writer holds it", repaired: repair, reclaimable: true))
    }
  }

  /// Leftovers of an interrupted collection that a repair settles (``ContentStore/recover(dryRun:)``):
  /// each blob moved aside is reported; deletions already committed are not damage, and are
  /// only carried out.
  private func checkLeftovers(repair: Bool, _ report: inout VerifyReport) throws {
    let recovered = try content.recover(dryRun: !repair)
    for path in recovered.restored + recovered.removed {
      report.add(
        .init(kind: .leftoverTrash, path: path, detail: "left by an interrupted collection", repaired: repair))
    }
  }
}
