import Foundation
import LarderCrypto

/// Restores a snapshot into an empty store (issue 35): the data directory's SQLite or an empty
/// PostgreSQL catalog, and blobs in the data directory or in an empty S3 bucket prefix.
///
/// Everything is checked before anything is written: the targets are empty (the data
/// directory empty or absent; a PostgreSQL catalog without a store; an S3 prefix with no blob
/// and no other store's identity), the snapshot's catalog matches its checksum and every blob
/// it references is present with its size. Blobs are re-hashed while copied, made durable in
/// one flush, and the catalog goes in last, in one step (a rename, or one PostgreSQL
/// transaction), so a restore killed halfway leaves no catalog: empty the target (the data
/// directory, the S3 prefix) and run it again. The
/// snapshot's pins, resumable uploads (whose bytes a backup does not copy) and pending S3
/// deletions (of the old bucket's addresses) are dropped.
/// ```swift
/// let manifest = try Restore(destination: dest, snapshot: nil, directory: dataURL).run()
/// ```
package struct Restore {
  let destination: any BackupDestination
  let snapshot: String?
  let directory: URL
  let catalog: CatalogLocation
  let blobs: BlobLocation
  let backends: StoreBackends
  var progress: (@Sendable (BackupProgress) -> Void)?

  package init(
    destination: any BackupDestination, snapshot: String?, directory: URL, catalog: CatalogLocation? = nil,
    blobs: BlobLocation? = nil, backends: StoreBackends = .embedded,
    progress: (@Sendable (BackupProgress) -> Void)? = nil
  ) {
    self.destination = destination
    self.snapshot = snapshot
    self.directory = directory.standardizedFileURL
    self.catalog = catalog ?? .dataDirectory
    self.blobs = blobs ?? .dataDirectory
    self.backends = backends
    self.progress = progress
  }

  package func run() throws -> BackupManifest {
    let manifest = try destination.snapshot(snapshot)
    let root = directory.path
    if let entry = POSIX.listDirectory(root).sorted().first {
      throw BackupError.notEmpty(directory: root, entry: entry)
    }
    if POSIX.exists(root), POSIX.lstat(root).map({ ($0.st_mode & S_IFMT) != S_IFDIR }) ?? true {
      throw BackupError.notEmpty(directory: root, entry: "a file, not a directory")
    }
    let (source, catalogFile) = try destination.openCatalog(manifest)
    let contents = try Backup.contents(of: source)
    let checker = BackupVerifier(destination: destination, deep: false)
    let listed = try destination.listBlobs()
    for (sha256, size) in contents.blobs {
      let hex = Hex.encode(sha256)
      if let problem = checker.check(hex: hex, size: size, listed: listed) {
        let names = try BackupVerifier.references(to: sha256, in: source)
        throw BackupError.damaged(
          snapshot: manifest.id,
          what: "blob \(hex) is \(problem)\(names.isEmpty ? "" : " (\(names.joined(separator: ", ")))")")
      }
    }
    // Checked before anything is made, the data directory included.
    let content = try BlobTarget.content(blobs, backends: backends)
    try BlobTarget.checkEmpty(content)
    if case .postgres = catalog { try checkEmptyCatalog() }
    var target = BlobTarget(store: try BlobStore(root: directory), content: content)

    // The identity first (as a store records it: blob store before catalog), the catalog last.
    try target.recordStoreIdentity(manifest.storeID)
    let fences = try Dictionary(
      source.rows("SELECT sha256, fence FROM blobs").compactMap { row in
        row.bytes("sha256").map { (Hex.encode($0), row.int("fence") ?? 0) }
      }, uniquingKeysWith: { a, _ in a })
    var done = BackupProgress(blobsTotal: Int64(contents.blobs.count), bytesTotal: contents.bytes)
    for (sha256, size) in contents.blobs {
      let hex = Hex.encode(sha256)
      try target.put(BlobAddress(hex: hex, fence: target.keepsFences ? fences[hex] ?? 0 : 0), size: size) { body in
        try destination.readBlob(hex, body)
      }
      done.blobsDone += 1
      done.bytesDone += size
      progress?(done)
    }
    try target.finish()

    let staged = target.store.tmpDirectory.appendingPathComponent("restore-\(manifest.id).sqlite").path
    try FileManager.default.copyItem(atPath: catalogFile.path, toPath: staged)
    try withExtendedLifetime(try SQLiteDatabase(path: staged)) { db in
      try db.execute("DELETE FROM snapshot_pins")
      try db.execute("DELETE FROM uploads")
      try db.execute("DELETE FROM blob_deletions")
      // The filesystem keeps every blob at fence 0 (an S3 store's rows name their fences).
      if !target.keepsFences { try db.execute("UPDATE blobs SET fence = 0 WHERE fence <> 0") }
      // Back to a rollback journal: the file is whole on its own when it is renamed.
      try db.execute("PRAGMA journal_mode=DELETE")
    }
    switch catalog {
    case .dataDirectory:
      let fd = try POSIX.open(staged, O_RDONLY | O_CLOEXEC)
      try POSIX.fsync(fd, path: staged)
      POSIX.close(fd)
      guard POSIX.rename(staged, directory.appendingPathComponent("larder.sqlite").path) else {
        throw LarderError.posix("rename", root)
      }
      try POSIX.fsyncDirectory(root)
    case .postgres:
      defer { _ = POSIX.unlink(staged) }
      _ = try CatalogCopy.run(fromCatalogAt: staged, to: catalog, backends: backends)
    }
    return manifest
  }

  /// A PostgreSQL target must hold no store: no identity and no row of content.
  private func checkEmptyCatalog() throws {
    let target = try Catalog(
      location: catalog, sqlitePath: directory.appendingPathComponent("larder.sqlite").path, backends: backends)
    let held = try target.read { db -> String? in
      if try StoreIdentity.read(db) != nil { return "a store identity" }
      for table in ["objects", "files", "blobs", "records"] {
        if try db.row("SELECT count(*) AS n FROM \(table)")?.int("n") != 0 { return "rows in \(table)" }
      }
      return nil
    }
    if let held {
      throw BackupError.notEmpty(directory: "\(catalog)", entry: held)
    }
  }
}

/// Where a restore puts the blobs: the data directory's `blobs/` or a content store that takes
/// restored blobs (S3), opened over a scratch catalog of its own (it only publishes and lists:
/// the restored catalog is written last).
private struct BlobTarget {
  let store: BlobStore
  let content: (any RestorableContent)?
  var touched: Set<String> = []

  init(store: BlobStore, content: (any RestorableContent)?) {
    self.store = store
    self.content = content
  }

  /// The content store of `location`; nil for the data directory's `blobs/`.
  static func content(_ location: BlobLocation, backends: StoreBackends) throws -> (any RestorableContent)? {
    guard case .s3(let url, let credentialsFile) = location else { return nil }
    guard let open = backends.s3 else {
      throw LarderError.invalidArgument("restoring into S3 needs the LarderS3Store module (backends: [.s3])")
    }
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("larder-restore-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: scratch) }
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    let catalog = try Catalog(
      location: .dataDirectory, sqlitePath: scratch.appendingPathComponent("larder.sqlite").path, backends: .embedded)
    guard let content = try open(url, credentialsFile, catalog) as? any RestorableContent else {
      throw BackupError.notSupportedYet("restoring into \(url)")
    }
    return content
  }

  /// Whether rows keep their fences (S3) or are all at fence 0 (the filesystem).
  var keepsFences: Bool { content != nil }

  func recordStoreIdentity(_ identity: String) throws {
    if let content { try content.recordStoreIdentity(identity) } else { try store.recordStoreIdentity(identity) }
  }

  /// A content store must hold no store: no identity and no blob.
  static func checkEmpty(_ content: (any RestorableContent)?) throws {
    guard let content, let held = try content.firstHeld() else { return }
    throw BackupError.notEmpty(directory: content.location, entry: held)
  }

  /// Stores the blob `address` (whose bytes `read` streams), re-hashed on the way.
  mutating func put(
    _ address: BlobAddress, size: Int64, _ read: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void
  ) throws {
    let tmp = store.tmpDirectory.path
    guard let content else {
      let target = store.path(forHex: address.hex)
      let parent = (target as NSString).deletingLastPathComponent
      if touched.insert(parent).inserted { try POSIX.makeDirectory(parent) }
      try BlobCopy.copy(hex: address.hex, size: size, to: target, through: tmp, durable: false, read)
      return
    }
    let staged = "\(tmp)/restore-\(address.hex)"
    try BlobCopy.copy(hex: address.hex, size: size, to: staged, through: tmp, durable: false, read)
    let blob = try StagedBlob.adopting(path: staged, sha256: Hex.decode(address.hex), removeOnDiscard: true)
    defer { blob.discard() }
    try content.placeRestored(blob, at: address)
  }

  /// Local blobs durable, with their names and directories, before the catalog names them:
  /// one flush of the filesystem for them all.
  func finish() throws {
    guard content == nil, !touched.isEmpty else { return }
    try POSIX.syncFilesystem(of: store.blobsPath)
  }
}
