import Foundation
import LarderCrypto

/// How far a backup, verify or restore is: blobs and bytes visited of the snapshot's.
public struct BackupProgress: Sendable {
  public var blobsDone: Int64 = 0
  public var blobsTotal: Int64 = 0
  public var bytesDone: Int64 = 0
  public var bytesTotal: Int64 = 0
}

/// Takes a consistent snapshot of a live store into a backup destination (issue 35, ARCHITECTURE §7f).
///
/// 1. pin (``SnapshotPins``), so the collector removes no blob from here on;
/// 2. the catalog as of one instant into the snapshot (``CatalogEngine/writeSnapshot(_:to:)``:
///    SQLite's online backup, PostgreSQL's REPEATABLE READ snapshot copied into an SQLite file);
/// 3. every blob row of that snapshot not already in the destination, re-hashed while copied,
///    from wherever the store keeps it (its ``ContentStore``: the data directory or S3);
/// 4. one flush of the destination for every blob copied, then the manifest, last; then the pin goes.
/// A run killed anywhere leaves no manifest, so nothing listed; the next run reuses the blobs.
/// ```swift
/// let manifest = try Backup(larder: larder, destination: DirectoryDestination("/backups/larder")).run()
/// ```
package struct Backup {
  let larder: Larder
  let destination: any BackupDestination
  var force = false
  var progress: (@Sendable (BackupProgress) -> Void)?

  package init(
    larder: Larder, destination: any BackupDestination, force: Bool = false,
    progress: (@Sendable (BackupProgress) -> Void)? = nil
  ) {
    self.larder = larder
    self.destination = destination
    self.force = force
    self.progress = progress
  }

  package func run() throws -> BackupManifest {
    guard let storeID = try larder.catalog.read({ db in try StoreIdentity.read(db) }) else {
      throw LarderError.invalidArgument("the store has no identity yet (open it once with this Larder)")
    }
    try destination.prepare()
    let lock = try destination.lock()
    defer { withExtendedLifetime(lock) {} }
    try destination.claim(for: storeID, force: force)
    try destination.removeLeftovers()

    let id = Self.newSnapshotID()
    let pins = SnapshotPins(catalog: larder.catalog)
    try pins.pin(id)
    defer { try? pins.release(id) }
    let createdAt = Date()
    let catalogPath = try destination.catalogStagingPath(id)
    defer { _ = POSIX.unlink(catalogPath) }
    try larder.catalog.read(snapshot: false) { db in try larder.catalog.engine.writeSnapshot(db, to: catalogPath) }
    let contents = try Self.summary(ofCatalogAt: catalogPath)
    // What to look at: with a listing, every blob (the listing says what is there); without one
    // (a directory), only the blobs the newest complete snapshot does not reference with the
    // same size, each looked at (a killed run's copies are found so). Trusting that snapshot
    // is safe: its manifest was written only after every blob it references was copied and
    // flushed, blobs leave DEST only by prune, which keeps every blob of a kept snapshot (and
    // keeps the newest), under the lock this run holds. Damage done to DEST by other hands is
    // what `backup verify` finds, as before.
    let listed = try destination.listBlobs()
    let trusted = listed == nil ? try? destination.snapshots().last.map { try destination.openCatalog($0) } : nil
    let candidates = try withExtendedLifetime(trusted?.1) {
      try Self.blobs(ofCatalogAt: catalogPath, notIn: trusted?.1.path)
    }
    try destination.storeCatalog(from: catalogPath, snapshot: id, name: Self.catalogFile)
    var total = BackupProgress(blobsTotal: contents.blobs, bytesTotal: contents.bytes)
    total.blobsDone = contents.blobs - Int64(candidates.count)
    total.bytesDone = contents.bytes - candidates.reduce(0) { $0 + $1.1 }
    progress?(total)

    var copiedBlobs: Int64 = 0
    var copiedBytes: Int64 = 0
    var renewed = ContinuousClock.now
    for (index, (sha256, size)) in candidates.enumerated() {
      if index == candidates.count / 2 && index > 0 { try larder.files.faults.hit(.backupMidCopy) }
      let hex = Hex.encode(sha256)
      let held = try listed.map { $0[hex] ?? -1 } ?? destination.storedBlob(hex)?.size
      if held != size {
        try destination.putBlob(hex: hex, size: size) { body in try larder.content.read(sha256, range: nil, body) }
        copiedBlobs += 1
        copiedBytes += size
      }
      total.blobsDone += 1
      total.bytesDone += size
      progress?(total)
      if ContinuousClock.now - renewed > .seconds(SnapshotPins.lease / 10) {
        try pins.renew(id)
        try lock.renew()
        renewed = .now
      }
    }
    // Every new blob durable before the manifest says the snapshot is whole. A crash before
    // it loses no snapshot, only copies the next run makes again (a blob at its name is
    // checked by size, and by hash when deep).
    try destination.flush()
    let manifest = BackupManifest(
      id: id, createdAt: createdAt, storeID: storeID, catalogFormat: "sqlite", catalogFile: Self.catalogFile,
      catalogSHA256: contents.catalogSHA256, catalogBytes: contents.catalogBytes,
      schemaVersion: contents.schemaVersion, objects: contents.objects, blobs: contents.blobs,
      bytes: contents.bytes, copiedBlobs: copiedBlobs, copiedBytes: copiedBytes)
    try destination.writeManifest(try manifest.encoded(), snapshot: id)
    return manifest
  }

  static let catalogFile = "catalog.sqlite"

  /// `20261206T031500.123Z-1a2b3c4d`: sorts by time to the millisecond, which is what orders a
  /// destination's snapshots (backups on one destination run one at a time, each longer than a
  /// millisecond); the suffix keeps two stores' snapshots apart.
  static func newSnapshotID() -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "UTC")
    formatter.dateFormat = "yyyyMMdd'T'HHmmss.SSS'Z'"
    return "\(formatter.string(from: Date()))-\(SecureRandom.hexIdentifier(byteCount: 4))"
  }

  struct Contents {
    var blobs: [([UInt8], Int64)]
    var bytes: Int64
    var objects: Int64
    var schemaVersion: Int
  }

  /// What a fresh snapshot file holds: its counts, bytes, schema version and checksum.
  struct Summary {
    var blobs: Int64
    var bytes: Int64
    var objects: Int64
    var schemaVersion: Int
    var catalogSHA256: String
    var catalogBytes: Int64
  }

  /// Makes a fresh snapshot file self-contained (rollback journal, so it opens read-only with
  /// no side files) and durable, and sums up what it references (in SQL: no row reaches Swift).
  static func summary(ofCatalogAt path: String) throws -> Summary {
    let (blobs, bytes, objects, version) = try withExtendedLifetime(try SQLiteDatabase(path: path)) { db in
      try db.execute("PRAGMA journal_mode=DELETE")
      let sums = try db.row("SELECT count(*) AS n, coalesce(sum(size), 0) AS bytes FROM blobs")
      let objects = try db.row("SELECT count(*) AS n FROM objects")?.int("n") ?? 0
      let version = try db.row("PRAGMA user_version")?.int("user_version") ?? 0
      return (sums?.int("n") ?? 0, sums?.int("bytes") ?? 0, objects, Int(version))
    }
    let fd = try POSIX.open(path, O_RDONLY | O_CLOEXEC)
    defer { POSIX.close(fd) }
    try POSIX.fsync(fd, path: path)
    let (sha256, size) = try BackupFiles.sha256(ofFile: path)
    return Summary(
      blobs: blobs, bytes: bytes, objects: objects, schemaVersion: version, catalogSHA256: sha256,
      catalogBytes: size)
  }

  /// The blob rows of the snapshot file at `path` that the catalog file `previous` (when
  /// given) has not with the same size: one anti-join in SQLite, in hash order.
  static func blobs(ofCatalogAt path: String, notIn previous: String?) throws -> [([UInt8], Int64)] {
    let db = try SQLiteDatabase(path: path, readOnly: true)
    var sql = "SELECT sha256, size FROM blobs ORDER BY sha256"
    if let previous {
      try db.execute("ATTACH DATABASE ? AS previous", [previous])
      sql = """
        SELECT sha256, size FROM blobs b WHERE NOT EXISTS (
          SELECT 1 FROM previous.blobs p WHERE p.sha256 = b.sha256 AND p.size = b.size) ORDER BY sha256
        """
    }
    var blobs: [([UInt8], Int64)] = []
    try db.forEachRow(sql) { row in
      if let sha256 = row.bytes("sha256") { blobs.append((sha256, row.int("size") ?? 0)) }
    }
    return blobs
  }

  static func contents(of db: Database) throws -> Contents {
    var blobs: [([UInt8], Int64)] = []
    var bytes: Int64 = 0
    try db.forEachRow("SELECT sha256, size FROM blobs ORDER BY sha256") { row in
      guard let sha256 = row.bytes("sha256") else { return }
      let size = row.int("size") ?? 0
      blobs.append((sha256, size))
      bytes += size
    }
    let objects = try db.row("SELECT count(*) AS n FROM objects")?.int("n") ?? 0
    let version = try db.row("PRAGMA user_version")?.int("user_version") ?? 0
    return Contents(blobs: blobs, bytes: bytes, objects: objects, schemaVersion: Int(version))
  }
}

/// One blob copied whole or not at all: into a temp file, hashed on the way (bytes that do not
/// hash to their name are refused, not copied), fsynced (unless `durable` is false: the caller
/// then flushes the filesystem once for a whole batch), renamed to `target`. The caller fsyncs
/// the target's directory.
package enum BlobCopy {
  package static func copy(
    hex: String, size: Int64, to target: String, through tmp: String, durable: Bool = true,
    _ read: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void
  ) throws {
    let temp = "\(tmp)/\(hex).\(SecureRandom.hexIdentifier(byteCount: 4)).part"
    let fd = try POSIX.open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode: 0o644)
    var open = true
    var placed = false
    defer {
      if open { POSIX.close(fd) }
      if !placed { _ = POSIX.unlink(temp) }
    }
    let digest = Digest(.sha256)
    var written: Int64 = 0
    try read { chunk in
      digest.update(chunk)
      try POSIX.writeAll(fd, chunk, path: temp)
      written += Int64(chunk.count)
    }
    let actual = Hex.encode(digest.finalize())
    guard actual == hex, written == size else {
      throw LarderError.invalidArgument(
        "blob \(hex) read back as \(written) bytes hashing to \(actual) (expected \(size) bytes): not copied")
    }
    // Read-only, as the store keeps its blobs (the verifier checks it).
    try POSIX.fchmod(fd, 0o444, path: temp)
    if durable { try POSIX.fsync(fd, path: temp) }
    POSIX.close(fd)
    open = false
    guard POSIX.rename(temp, target) else { throw LarderError.posix("rename", target) }
    placed = true
  }
}
