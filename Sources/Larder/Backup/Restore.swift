import Foundation
import LarderCrypto

/// Restores a snapshot into an empty store (issue 35): the data directory's SQLite or an empty
/// PostgreSQL catalog, and blobs in the data directory or in an empty S3 bucket prefix.
///
/// Everything is checked before any of the store is written: the targets are empty (the data
/// directory empty or absent; a PostgreSQL catalog without a store; the content store, opened
/// through the seam the store uses over the restored catalog staged in the data directory,
/// with no blob and no store's identity: a refusal removes what the staging made), the
/// snapshot's catalog matches its checksum and every blob it references is present with its size. Blobs are re-hashed while copied, made durable in
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
    if case .postgres = catalog { try checkEmptyCatalog() }

    // The restored catalog is staged in the data directory first: the target's content store
    // is opened over it, through the seam the store itself uses (``Larder/openContent``), and
    // asked whether it is empty before any blob or identity is written.
    let existed = POSIX.exists(root)
    let store = try BlobStore(root: directory)
    let staged = store.tmpDirectory.appendingPathComponent("restore-\(manifest.id).sqlite").path
    defer { _ = POSIX.unlink(staged) }
    try FileManager.default.copyItem(atPath: catalogFile.path, toPath: staged)
    let outcome = try withExtendedLifetime(try Catalog(path: staged)) { stagedCatalog -> Result<Bool, BackupError> in
      let content = try RestoreTarget.content(blobs, store: store, catalog: stagedCatalog, backends: backends)
      if let held = try content.firstHeld() { return .failure(.notEmpty(directory: content.location, entry: held)) }
      // The identity first (as a store records it: blob store before catalog), the catalog last.
      try content.recordStoreIdentity(manifest.storeID)
      let fences = try Dictionary(
        source.rows("SELECT sha256, fence FROM blobs").compactMap { row in
          row.bytes("sha256").map { (Hex.encode($0), row.int("fence") ?? 0) }
        }, uniquingKeysWith: { a, _ in a })
      var done = BackupProgress(blobsTotal: Int64(contents.blobs.count), bytesTotal: contents.bytes)
      let tmp = store.tmpDirectory.path
      for (sha256, size) in contents.blobs {
        let hex = Hex.encode(sha256)
        let file = "\(tmp)/restore-\(hex)"
        try BlobCopy.copy(hex: hex, size: size, to: file, through: tmp, durable: false) { body in
          try destination.readBlob(hex, body)
        }
        let blob = try StagedBlob.adopting(path: file, sha256: sha256, removeOnDiscard: true)
        defer { blob.discard() }
        let address = BlobAddress(hex: hex, fence: content.restoresFences ? fences[hex] ?? 0 : 0)
        try content.placeRestored(blob, at: address)
        done.blobsDone += 1
        done.bytesDone += size
        progress?(done)
      }
      try content.finishRestore()
      return .success(content.restoresFences)
    }
    let restoresFences: Bool
    switch outcome {
    case .failure(let refusal):
      // Nothing of the store's is there yet: what this made goes, the directory as it was.
      for entry in POSIX.listDirectory(root) { try? FileManager.default.removeItem(atPath: "\(root)/\(entry)") }
      if !existed { _ = rmdir(root) }
      throw refusal
    case .success(let keeps):
      restoresFences = keeps
    }

    try withExtendedLifetime(try SQLiteDatabase(path: staged)) { db in
      try db.execute("DELETE FROM snapshot_pins")
      try db.execute("DELETE FROM uploads")
      try db.execute("DELETE FROM blob_deletions")
      // A store that keeps every blob at fence 0 (the filesystem) gets rows at 0.
      if !restoresFences { try db.execute("UPDATE blobs SET fence = 0 WHERE fence <> 0") }
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

/// Where a restore puts the blobs: the content store the restored store will use.
private enum RestoreTarget {
  static func content(_ location: BlobLocation, store: BlobStore, catalog: Catalog, backends: StoreBackends) throws
    -> any RestorableContent
  {
    guard let content = try Larder.openContent(location, blobs: store, catalog: catalog, backends: backends) as? any RestorableContent
    else { throw BackupError.notSupportedYet("restoring into \(location)") }
    return content
  }
}
