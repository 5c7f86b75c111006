import Foundation
import LarderCrypto

/// Checks every invariant of ARCHITECTURE §4 on a data directory, and optionally repairs.
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

  private var remote: Bool { !larder.blobBackend.publishesInsideTransaction }

  private var catalog: Catalog { larder.catalog }
  private var blobs: BlobStore { larder.blobs }

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
    if remote && repair {
      // A collection that died left deletion intents: their addresses have no row, so finishing
      // them is the collector's work, done here too before anything is judged a stray.
      _ = try BlobDeletions.finishLeftovers(catalog: catalog, backend: larder.blobBackend)
    }
    try checkCatalog(&report)
    // Trash first: a blob left there by a failed collection goes back before its address is
    // checked, so it is not reported (or repaired) as missing.
    try checkTrash(repair: repair, &report)
    try checkBlobs(repair: repair, progress: progress, &report)
    if remote {
      try checkRemoteStrays(repair: repair, &report)
    } else {
      try checkStrays(repair: repair, &report)
    }
    checkTemp(repair: repair, &report)
    report.durationSeconds = GarbageCollector.seconds(clock.now - started)
    return report
  }

  // MARK: catalog

  private func checkCatalog(_ report: inout VerifyReport) throws {
    try catalog.read { db in
      // PostgreSQL has no integrity_check and enforces every foreign key at once, so both
      // PRAGMA checks are SQLite's alone; the size check below is the catalog's own.
      if !catalog.isShared { try checkSQLiteFile(db, &report) }
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

  private func checkSQLiteFile(_ db: Database, _ report: inout VerifyReport) throws {
    for row in try db.rows("PRAGMA integrity_check") {
      let line = row.values.first.flatMap { if case .text(let t) = $0 { t } else { nil } } ?? "?"
      if line != "ok" { report.add(.init(kind: .integrity, detail: line)) }
    }
    for row in try db.rows("PRAGMA foreign_key_check") {
      let table = row.string("table") ?? "?"
      let parent = row.string("parent") ?? "?"
      report.add(.init(kind: .foreignKey, detail: "a row of \(table) refers to a missing row of \(parent)"))
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
        if remote {
          try checkRemoteBlob(
            BlobAddress(sha256: sha256, fence: fence), size: size, md5: md5, repair: repair, &report)
        } else {
          try checkBlob(sha256: sha256, size: size, md5: md5, repair: repair, buffer: &buffer, &report)
        }
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

  private func checkBlob(
    sha256: [UInt8], size: Int64, md5: [UInt8]?, repair: Bool, buffer: inout [UInt8],
    _ report: inout VerifyReport
  ) throws {
    let hex = Hex.encode(sha256)
    let path = blobs.path(forHex: hex)
    guard let st = POSIX.lstat(path) else {
      guard errno == ENOENT else { throw LarderError.posix("stat", path) }
      try checkMissing(
        sha256: sha256, hex: hex, path: path, repair: repair, stillMissing: { !POSIX.exists(path) }, &report)
      return
    }
    var problem: (VerifyReport.Finding.Kind, String)?
    if (st.st_mode & S_IFMT) != S_IFREG {
      problem = (.notRegularFile, "not a regular file (mode \(String(st.st_mode, radix: 8)))")
    } else if Int64(st.st_size) != size {
      problem = (.sizeMismatch, "file has \(st.st_size) bytes, row says \(size)")
    } else {
      let (actual, actualMD5, hashed) = try hash(path: path, md5: md5 != nil, buffer: &buffer)
      report.bytesHashed += hashed
      if actual != sha256 {
        problem = (.hashMismatch, "content hashes to \(Hex.encode(actual))")
      } else if let md5, let actualMD5, md5 != actualMD5 {
        // The content is right (its address says so); only the recorded MD5 is wrong.
        let repaired = repair ? try clearMD5(sha256: sha256, recorded: md5) : false
        report.add(
          .init(
            kind: .md5Mismatch, sha256: hex, path: path,
            detail: "content's MD5 is \(Hex.encode(actualMD5)), row says \(Hex.encode(md5))", repaired: repaired))
      }
    }
    if let (kind, detail) = problem {
      let repaired = repair ? try quarantine(sha256: sha256, hex: hex, path: path) : false
      report.add(.init(kind: kind, sha256: hex, path: path, detail: detail, repaired: repaired))
      return
    }
    let mode = st.st_mode & 0o7777
    if mode != 0o444 {
      let repaired = repair && POSIX.chmod(path, 0o444)
      report.add(
        .init(
          kind: .badPermissions, sha256: hex, path: path,
          detail: "mode \(String(mode, radix: 8)), expected 444",
          repaired: repaired))
    }
  }

  /// Forgets a wrong MD5 (only if it is still the one found), so the backfill computes it again.
  private func clearMD5(sha256: [UInt8], recorded: [UInt8]) throws -> Bool {
    try catalog.write { db in
      try db.execute("UPDATE blobs SET md5 = NULL WHERE sha256 = ? AND md5 = ?", [sha256, recorded])
      return db.changes > 0
    }
  }

  /// SHA-256 (and MD5 when `md5`) of a file, streamed through `buffer`; the file is opened
  /// without following links.
  private func hash(path: String, md5: Bool, buffer: inout [UInt8]) throws -> ([UInt8], [UInt8]?, Int64) {
    let fd = try POSIX.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    defer { POSIX.close(fd) }
    let digest = Digest(.sha256)
    let md5Digest = md5 ? Digest(.md5) : nil
    var offset: Int64 = 0
    while true {
      let n = try buffer.withUnsafeMutableBytes { try POSIX.readFully(fd, into: $0, at: offset, path: path) }
      if n == 0 { break }
      buffer.withUnsafeBytes {
        let chunk = UnsafeRawBufferPointer(rebasing: $0[0..<n])
        guard let md5Digest else { return digest.update(chunk) }
        // Both digests read the same chunk on two cores: verify is bounded by the slower hash
        // (or the disk), not by SHA-256 and MD5 one after the other.
        let group = DispatchGroup()
        let md5Work = BlockHashing(digests: [md5Digest], block: chunk)
        DispatchQueue.global(qos: .userInitiated).async(group: group) { md5Work.run() }
        digest.update(chunk)
        group.wait()
      }
      offset += Int64(n)
      if n < buffer.count { break }
    }
    return (digest.finalize(), md5Digest?.finalize(), offset)
  }

  /// A row without its file: explained by a quarantine, or lost. With blobs in S3, `fence` is
  /// the address found missing: it is checked again *before* the write transaction (no S3 call
  /// under the lock), and inside it the row must still name it (a writer may have healed it).
  private func checkMissing(
    sha256: [UInt8], hex: String, path: String, repair: Bool, fence: Int64? = nil, stillMissing: () throws -> Bool,
    _ report: inout VerifyReport
  )
    throws
  {
    let quarantined = try catalog.read { db in
      try db.row("SELECT 1 FROM files WHERE blob_sha256 = ? AND quarantined = 1", [sha256]) != nil
    }
    if quarantined {
      report.quarantinedBlobs += 1
      return
    }
    var repaired = false
    if repair {
      let missingBefore = fence == nil ? true : try stillMissing()
      repaired = try catalog.write { db in
        // Recheck under the lock; no files left: the row alone goes, else mark them.
        guard missingBefore else { return true }
        if let fence {
          if try db.row("SELECT 1 FROM blobs WHERE sha256 = ? AND fence = ?", [sha256, fence]) == nil { return true }
        } else {
          if try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [sha256]) == nil { return true }
          if try !stillMissing() { return true }
        }
        try db.execute(
          "DELETE FROM blobs WHERE sha256 = ? AND NOT EXISTS (SELECT 1 FROM files WHERE blob_sha256 = ?)",
          [sha256, sha256])
        if db.changes == 0 {
          try db.execute("UPDATE files SET quarantined = 1 WHERE blob_sha256 = ?", [sha256])
        }
        return true
      }
    }
    report.add(
      .init(
        kind: .missingBlobFile, sha256: hex, path: path,
        detail: remote ? "the blob's object is missing" : "the blob's file is missing",
        repaired: repaired))
  }

  /// Moves a corrupt blob aside and marks its files, in one write transaction.
  private func quarantine(sha256: [UInt8], hex: String, path: String) throws -> Bool {
    let directory = blobs.quarantineDirectory.path
    return try catalog.write { db in
      try db.execute("UPDATE files SET quarantined = 1 WHERE blob_sha256 = ?", [sha256])
      if db.changes == 0 {
        // No file uses it: nothing needs the row to answer "corrupt", and a row with nothing
        // behind it would be a missing blob at the next check.
        try db.execute(
          "DELETE FROM blobs WHERE sha256 = ? AND NOT EXISTS (SELECT 1 FROM files WHERE blob_sha256 = ?)",
          [sha256, sha256])
      }
      var target = "\(directory)/\(hex)"
      if POSIX.exists(target) { target += ".\(SecureRandom.hexIdentifier(byteCount: 4))" }
      guard POSIX.rename(path, target) else { throw LarderError.posix("rename", path) }
      try POSIX.fsyncDirectory(directory)
      try POSIX.fsyncDirectory((path as NSString).deletingLastPathComponent)
      return true
    }
  }

  // MARK: blobs in S3

  /// A row's object in S3: there with the row's size (a HEAD), and with `deep` its content
  /// hashes to its address. Repair marks the files of a missing or corrupt object quarantined
  /// (and drops a row no file needs); a corrupt object is condemned by a deletion intent in the
  /// same transaction and deleted after it, so the next upload of that content goes to a fresh
  /// fence and heals the files.
  private func checkRemoteBlob(
    _ address: BlobAddress, size: Int64, md5: [UInt8]?, repair: Bool, _ report: inout VerifyReport
  ) throws {
    let (sha256, hex) = (address.sha256, address.hex)
    let backend = larder.blobBackend
    let place = "\(backend.location) \(address.key)"
    guard let stored = try backend.storedSize(of: address) else {
      // A writer healing a quarantine may have moved the row to a new fence since the page was
      // read (or gc took it): only a row that still names this address is missing its bytes.
      let current = try catalog.read(snapshot: false) { db in
        try db.row("SELECT fence FROM blobs WHERE sha256 = ?", [sha256])?.int("fence")
      }
      guard current == address.fence else { return }
      try checkMissing(
        sha256: sha256, hex: hex, path: place, repair: repair, fence: address.fence,
        stillMissing: { try backend.storedSize(of: address) == nil }, &report)
      return
    }
    var problem: (VerifyReport.Finding.Kind, String)?
    if stored != size {
      problem = (.sizeMismatch, "object has \(stored) bytes, row says \(size)")
    } else if deep {
      let digest = Digest(.sha256)
      let md5Digest = md5 != nil ? Digest(.md5) : nil
      try backend.read(address, range: nil) {
        digest.update($0)
        md5Digest?.update($0)
      }
      report.bytesHashed += size
      let actual = digest.finalize()
      if actual != sha256 {
        problem = (.hashMismatch, "content hashes to \(Hex.encode(actual))")
      } else if let md5, let actualMD5 = md5Digest?.finalize(), md5 != actualMD5 {
        let repaired = repair ? try clearMD5(sha256: sha256, recorded: md5) : false
        report.add(
          .init(
            kind: .md5Mismatch, sha256: hex, path: place,
            detail: "content's MD5 is \(Hex.encode(actualMD5)), row says \(Hex.encode(md5))", repaired: repaired))
      }
    }
    guard let (kind, detail) = problem else { return }
    var repaired = false
    if repair {
      let condemned = try catalog.write { db -> Bool in
        // Only if the row still names these bytes (a writer may have healed it meanwhile).
        guard try db.row("SELECT 1 FROM blobs WHERE sha256 = ? AND fence = ?", [sha256, address.fence]) != nil
        else { return false }
        try db.execute("UPDATE files SET quarantined = 1 WHERE blob_sha256 = ?", [sha256])
        if db.changes == 0 {
          try db.execute(
            "DELETE FROM blobs WHERE sha256 = ? AND NOT EXISTS (SELECT 1 FROM files WHERE blob_sha256 = ?)",
            [sha256, sha256])
        }
        try BlobDeletions.record([address], in: db)
        return true
      }
      if condemned { try BlobDeletions.finish([address], catalog: catalog, backend: backend) }
      repaired = true
    }
    report.add(.init(kind: kind, sha256: hex, path: place, detail: detail, repaired: repaired))
  }

  /// Objects no row names (nor a deletion intent). Repair deletes those older than the temp
  /// age and below the floor it raises first, as gc does (``BlobFences``): a younger one may
  /// be an upload whose commit is on its way.
  private func checkRemoteStrays(repair: Bool, _ report: inout VerifyReport) throws {
    let backend = larder.blobBackend
    let now = Date()
    let oldest = now.addingTimeInterval(-Self.tempAge)
    let floor =
      repair
      ? try BlobFences.raiseFloor(catalog, now: now, age: Self.tempAge)
      : try catalog.read { db in try BlobFences.floor(db) }
    var pending: [(address: BlobAddress, size: Int64)] = []
    func flush() throws {
      defer { pending.removeAll(keepingCapacity: true) }
      // Every stray is reported; only those below the floor can be removed yet.
      let strays = try BlobDeletions.strays(pending, floor: .max, catalog: catalog)
      var removed: Set<BlobAddress> = []
      if repair {
        let dead = strays.filter { $0.address.fence < floor }
        removed = Set(try BlobDeletions.removeStrays(dead, catalog: catalog, backend: backend).map(\.address))
      }
      for stray in strays {
        report.add(
          .init(
            kind: .strayBlobFile, sha256: stray.address.hex, path: "\(backend.location) \(stray.address.key)",
            detail: "no blobs row names it", repaired: removed.contains(stray.address), reclaimable: true))
      }
    }
    try backend.forEachStoredBlob(dated: { address, size, stored in
      guard stored < oldest else { return }
      pending.append((address, size))
      if pending.count >= 500 { try flush() }
    })
    if !pending.isEmpty { try flush() }
  }

  // MARK: files without rows

  private func checkStrays(repair: Bool, _ report: inout VerifyReport) throws {
    let walker = BlobTreeWalker(root: blobs.blobsDirectory.path)
    var candidates: [BlobTreeWalker.Entry] = []
    try walker.forEachUnreferenced(catalog: catalog) { strays in
      candidates.append(contentsOf: strays)
      if candidates.count >= 500 {
        try settleStrays(candidates, repair: repair, &report)
        candidates.removeAll(keepingCapacity: true)
      }
    }
    if !candidates.isEmpty { try settleStrays(candidates, repair: repair, &report) }
  }

  /// Rechecks under the write lock (``BlobTreeWalker/settleStrays``) and reports each stray.
  private func settleStrays(_ candidates: [BlobTreeWalker.Entry], repair: Bool, _ report: inout VerifyReport)
    throws
  {
    for stray in try BlobTreeWalker.settleStrays(candidates, catalog: catalog, remove: repair) {
      var hex: String?
      if case .blob(let h, _) = stray.entry { hex = h }
      let detail =
        !stray.removable ? "a directory where none belongs"
        : hex == nil ? "not at a blob address" : "no blobs row names it"
      // A regular file at a blob address that no row names is what a write leaves when it dies
      // between linking and committing: reclaimable. Anything else under blobs/ is a fault.
      report.add(
        .init(
          kind: .strayBlobFile, sha256: hex, path: stray.path, detail: detail, repaired: stray.removed,
          reclaimable: stray.isUncommittedBlob))
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

  private func checkTrash(repair: Bool, _ report: inout VerifyReport) throws {
    let directory = blobs.trashDirectory.path
    let names = POSIX.listDirectory(directory)
    guard !names.isEmpty else { return }
    var repaired = false
    if repair {
      _ = try Recovery.recoverTrash(blobs: blobs, catalog: catalog)
      repaired = true
    }
    for name in names {
      report.add(
        .init(
          kind: .leftoverTrash, path: "\(directory)/\(name)", detail: "left by an interrupted collection",
          repaired: repaired))
    }
  }
}
