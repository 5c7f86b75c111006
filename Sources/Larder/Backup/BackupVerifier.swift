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
  let destination: any BackupDestination
  let deep: Bool
  var progress: (@Sendable (BackupProgress) -> Void)?

  package init(
    destination: any BackupDestination, deep: Bool, progress: (@Sendable (BackupProgress) -> Void)? = nil
  ) {
    self.destination = destination
    self.deep = deep
    self.progress = progress
  }

  /// Verifies `id`, or every complete snapshot when nil; returns the snapshots checked and the damage.
  package func verify(snapshot id: String?) throws -> (checked: [BackupManifest], damage: [BackupDamage]) {
    let manifests = try id.map { [try destination.snapshot($0)] } ?? destination.snapshots()
    guard !manifests.isEmpty else {
      throw BackupError.unknownSnapshot(id: nil, destination: destination.location)
    }
    let listed = try destination.listBlobs()
    var damage: [BackupDamage] = []
    var verified: Set<String> = []
    for manifest in manifests {
      let db: SQLiteDatabase
      let file: BackupLocalFile
      do {
        (db, file) = try destination.openCatalog(manifest)
      } catch let error as BackupError {
        damage.append(.init(snapshot: manifest.id, sha256: nil, detail: error.description, references: []))
        continue
      }
      defer { withExtendedLifetime(file) {} }
      let contents = try Backup.contents(of: db)
      var done = BackupProgress(blobsTotal: Int64(contents.blobs.count), bytesTotal: contents.bytes)
      for (sha256, size) in contents.blobs {
        let hex = Hex.encode(sha256)
        if !verified.contains(hex) {
          if let problem = check(hex: hex, size: size, listed: listed) {
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

  /// What is wrong with the copy of `hex`, if anything; `listed` is the destination's
  /// listing when it has one (else each blob is looked at).
  func check(hex: String, size: Int64, listed: [String: Int64]?) -> String? {
    let place = destination.place(ofBlob: hex)
    let stored: BackupStoredBlob?
    do {
      if let listed {
        stored = listed[hex].map { BackupStoredBlob(size: $0) }
      } else {
        stored = try destination.storedBlob(hex)
      }
    } catch {
      return "unreadable: \(error)"
    }
    guard let stored else { return "missing (\(place))" }
    guard stored.isRegular else { return "not a regular file (\(place))" }
    guard stored.size == size else { return "\(stored.size) bytes, the catalog says \(size) (\(place))" }
    guard deep else { return nil }
    do {
      let digest = Digest(.sha256)
      try destination.readBlob(hex) { digest.update($0) }
      let actual = Hex.encode(digest.finalize())
      return actual == hex ? nil : "its bytes hash to \(actual) (\(place))"
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
  let destination: any BackupDestination

  package init(destination: any BackupDestination) { self.destination = destination }

  package func prune(keep: Int) throws -> (snapshots: [String], blobs: Int, bytes: Int64) {
    guard try destination.exists() else {
      throw BackupError.unknownSnapshot(id: nil, destination: destination.location)
    }
    let lock = try destination.lock()
    defer { withExtendedLifetime(lock) {} }
    try destination.removeLeftovers()
    let all = try destination.snapshots()
    let removed = Array(all.dropLast(keep))
    let kept = all.suffix(keep)
    // Read the kept catalogs first: a damaged one stops the prune before anything is removed.
    var referenced: Set<String> = []
    for manifest in kept {
      let (db, file) = try destination.openCatalog(manifest)
      try withExtendedLifetime(file) {
        try db.forEachRow("SELECT sha256 FROM blobs") { row in
          if let sha256 = row.bytes("sha256") { referenced.insert(Hex.encode(sha256)) }
        }
      }
    }
    for manifest in removed { try destination.removeSnapshot(manifest.id) }
    var unreferenced: [(String, Int64)] = []
    try destination.forEachBlob { hex, size in
      if !referenced.contains(hex) { unreferenced.append((hex, size)) }
    }
    var bytes: Int64 = 0
    for (hex, size) in unreferenced {
      try destination.removeBlob(hex)
      bytes += size
    }
    return (removed.map(\.id), unreferenced.count, bytes)
  }
}
