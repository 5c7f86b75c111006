import Foundation
import LarderCrypto

/// Restores a snapshot into an empty data directory (issue 35).
///
/// Everything is checked before anything is written: the target is empty (or absent), the
/// snapshot's catalog matches its checksum and every blob it references is present with its
/// size. Blobs are re-hashed while copied. The catalog is renamed into place last, so a restore
/// killed halfway leaves no `larder.sqlite` (remove the directory and run it again). The
/// snapshot's pins and resumable uploads (whose bytes a backup does not copy) are dropped.
/// ```swift
/// let manifest = try Restore(destination: dest, snapshot: nil, directory: dataURL).run()
/// ```
package struct Restore {
  let destination: BackupDestination
  let snapshot: String?
  let directory: URL
  var progress: (@Sendable (BackupProgress) -> Void)?

  package init(
    destination: BackupDestination, snapshot: String?, directory: URL,
    progress: (@Sendable (BackupProgress) -> Void)? = nil
  ) {
    self.destination = destination
    self.snapshot = snapshot
    self.directory = directory.standardizedFileURL
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
    let source = try destination.openCatalog(manifest)
    let contents = try Backup.contents(of: source)
    let checker = BackupVerifier(destination: destination, deep: false)
    for (sha256, size) in contents.blobs {
      let hex = Hex.encode(sha256)
      if let problem = checker.check(hex: hex, size: size) {
        let names = try BackupVerifier.references(to: sha256, in: source)
        throw BackupError.damaged(
          snapshot: manifest.id,
          what: "blob \(hex) is \(problem)\(names.isEmpty ? "" : " (\(names.joined(separator: ", ")))")")
      }
    }

    let store = try BlobStore(root: directory)
    var done = BackupProgress(blobsTotal: Int64(contents.blobs.count), bytesTotal: contents.bytes)
    var touched: Set<String> = []
    for (sha256, size) in contents.blobs {
      let hex = Hex.encode(sha256)
      let target = store.path(forHex: hex)
      let parent = (target as NSString).deletingLastPathComponent
      if try POSIX.makeDirectory(parent) {
        touched.insert(parent)
        touched.insert((parent as NSString).deletingLastPathComponent)
      }
      let from = destination.blobPath(hex)
      try BlobCopy.copy(hex: hex, size: size, to: target, through: store.tmpDirectory.path) { body in
        let reader = try BlobReader(path: from)
        try reader.forEachChunk(in: nil, body)
      }
      touched.insert(parent)
      done.blobsDone += 1
      done.bytesDone += size
      progress?(done)
    }
    for dir in touched.sorted(by: >) { try POSIX.fsyncDirectory(dir) }

    // The identity first (as a store records it: blob store before catalog), the catalog last.
    try store.recordStoreIdentity(manifest.storeID)
    let staged = store.tmpDirectory.appendingPathComponent("restore-\(manifest.id).sqlite").path
    try FileManager.default.copyItem(
      atPath: "\(destination.snapshotDirectory(manifest.id))/\(manifest.catalogFile)", toPath: staged)
    try withExtendedLifetime(try SQLiteDatabase(path: staged)) { db in
      try db.execute("DELETE FROM snapshot_pins")
      try db.execute("DELETE FROM uploads")
      // Back to a rollback journal: the file is whole on its own when it is renamed.
      try db.execute("PRAGMA journal_mode=DELETE")
    }
    let fd = try POSIX.open(staged, O_RDONLY | O_CLOEXEC)
    try POSIX.fsync(fd, path: staged)
    POSIX.close(fd)
    guard POSIX.rename(staged, directory.appendingPathComponent("larder.sqlite").path) else {
      throw LarderError.posix("rename", root)
    }
    try POSIX.fsyncDirectory(root)
    return manifest
  }
}
