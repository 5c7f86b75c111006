import Foundation
import LarderCrypto

/// One thing wrong in a backup destination, named by snapshot and by what it breaks.
public struct BackupDamage: Sendable, Codable, Equatable {
  public var snapshot: String
  /// The blob's SHA-256 (hex); nil for the catalog itself.
  public var sha256: String?
  public var detail: String
  /// `bucket/name` of each object (and `type/id` of each model attachment) the damage breaks.
  public var references: [String]
}

/// Checks snapshots: the catalog's checksum, and every blob it references present with its
/// size; `deep` re-hashes each blob.
/// ```swift
/// let damage = try BackupVerifier(destination: dest, deep: true).verify(snapshot: nil)
/// ```
package struct BackupVerifier {
  let destination: BackupDestination
  let deep: Bool
  var progress: (@Sendable (BackupProgress) -> Void)?

  package init(
    destination: BackupDestination, deep: Bool, progress: (@Sendable (BackupProgress) -> Void)? = nil
  ) {
    self.destination = destination
    self.deep = deep
    self.progress = progress
  }

  /// Verifies `id`, or every complete snapshot when nil; returns the snapshots checked and the damage.
  package func verify(snapshot id: String?) throws -> (checked: [BackupManifest], damage: [BackupDamage]) {
    let manifests = try id.map { [try destination.snapshot($0)] } ?? destination.snapshots()
    guard !manifests.isEmpty else {
      throw BackupError.unknownSnapshot(id: nil, destination: destination.root)
    }
    var damage: [BackupDamage] = []
    var verified: Set<String> = []
    for manifest in manifests {
      let db: SQLiteDatabase
      do {
        db = try destination.openCatalog(manifest)
      } catch let error as BackupError {
        damage.append(.init(snapshot: manifest.id, sha256: nil, detail: error.description, references: []))
        continue
      }
      let contents = try Backup.contents(of: db)
      var done = BackupProgress(blobsTotal: Int64(contents.blobs.count), bytesTotal: contents.bytes)
      for (sha256, size) in contents.blobs {
        let hex = Hex.encode(sha256)
        if !verified.contains(hex) {
          if let problem = check(hex: hex, size: size) {
            damage.append(
              .init(
                snapshot: manifest.id, sha256: hex, detail: problem,
                references: try Self.references(to: sha256, in: db)))
          } else {
            verified.insert(hex)
          }
        }
        done.blobsDone += 1
        done.bytesDone += size
        progress?(done)
      }
    }
    return (manifests, damage)
  }

  /// What is wrong with the copy of `hex`, if anything.
  func check(hex: String, size: Int64) -> String? {
    let path = destination.blobPath(hex)
    guard let st = POSIX.lstat(path) else { return "missing (\(path))" }
    guard (st.st_mode & S_IFMT) == S_IFREG else { return "not a regular file (\(path))" }
    guard Int64(st.st_size) == size else { return "\(st.st_size) bytes, the catalog says \(size) (\(path))" }
    guard deep else { return nil }
    do {
      let (actual, _) = try BackupDestination.sha256(ofFile: path)
      return actual == hex ? nil : "its bytes hash to \(actual) (\(path))"
    } catch {
      return "unreadable: \(error)"
    }
  }

  /// The objects and model attachments whose file is the blob `sha256`.
  static func references(to sha256: [UInt8], in db: Database) throws -> [String] {
    let objects = try db.rows(
      "SELECT o.bucket, o.name FROM objects o JOIN files f ON f.id = o.file_id WHERE f.blob_sha256 = ? ORDER BY 1, 2",
      [sha256]
    ).map { "\($0.string("bucket") ?? "")/\($0.string("name") ?? "")" }
    let attachments = try db.rows(
      "SELECT a.record_type, a.record_id FROM attachments a JOIN files f ON f.id = a.file_id WHERE f.blob_sha256 = ? ORDER BY 1, 2",
      [sha256]
    ).map { "model \($0.string("record_type") ?? "")/\($0.string("record_id") ?? "")" }
    return objects + attachments
  }
}

/// Removes all but the newest `keep` snapshots, then every blob no kept snapshot references
/// (under the destination's lock, so no backup is copying blobs not yet in a manifest).
package struct BackupPruner {
  let destination: BackupDestination

  package init(destination: BackupDestination) { self.destination = destination }

  package func prune(keep: Int) throws -> (snapshots: [String], blobs: Int, bytes: Int64) {
    guard POSIX.exists(destination.snapshotsRoot) else {
      throw BackupError.unknownSnapshot(id: nil, destination: destination.root)
    }
    let lock = try destination.lock()
    defer { withExtendedLifetime(lock) {} }
    destination.removeLeftovers()
    let all = try destination.snapshots()
    let removed = Array(all.dropLast(keep))
    let kept = all.suffix(keep)
    // Read the kept catalogs first: a damaged one stops the prune before anything is removed.
    var referenced: Set<String> = []
    for manifest in kept {
      let db = try destination.openCatalog(manifest)
      try db.forEachRow("SELECT sha256 FROM blobs") { row in
        if let sha256 = row.bytes("sha256") { referenced.insert(Hex.encode(sha256)) }
      }
    }
    for manifest in removed { destination.removeSnapshot(manifest.id) }
    try POSIX.fsyncDirectory(destination.snapshotsRoot)
    var blobs = 0
    var bytes: Int64 = 0
    for a in POSIX.listDirectory(destination.blobsRoot) {
      for b in POSIX.listDirectory("\(destination.blobsRoot)/\(a)") {
        let directory = "\(destination.blobsRoot)/\(a)/\(b)"
        for hex in POSIX.listDirectory(directory) where !referenced.contains(hex) {
          let size = POSIX.lstat("\(directory)/\(hex)").map { Int64($0.st_size) } ?? 0
          if POSIX.unlink("\(directory)/\(hex)") {
            blobs += 1
            bytes += size
          }
        }
      }
    }
    return (removed.map(\.id), blobs, bytes)
  }
}
