import Foundation
import Larder

/// One commit's content into ``S3ContentStore`` (ARCHITECTURE.md, "Fenced deletion"): bytes are
/// published *before* the write transaction, with no catalog lock or transaction open, and the
/// transaction makes only catalog decisions, with no call to the remote store inside it.
///
/// A snapshot read asks whether a row exists (and whether its files are quarantined). If not,
/// the content goes up to `(sha256, F)` for a fresh fence F (``BlobFences/next(_:)``). Inside
/// the transaction a row there now is referenced (our upload is an orphan, removed after the
/// commit); else the row is inserted at F, if F is still at or above the floor
/// (``BlobFences/mayCommit(_:in:)``). A row that vanished since the read (a collector deleted
/// it), a floor that passed F, or a quarantined row to heal without bytes of our own roll the
/// transaction back for an upload to a fresh fence, then a retry (at most ``attempts`` in all).
final class FencedIngest: ContentIngest {
  /// How many times a commit uploads again after its fence went stale (a collector deleted the
  /// row it meant to reference, or raised the floor past its fence) before giving up.
  static let attempts = 3

  /// Thrown inside the transaction when it needs bytes at a fresh fence first: the
  /// transaction rolls back, the upload happens with no lock held, and the commit retries.
  private struct NeedsUpload: Error {}

  private let staged: StagedBlob
  private let store: S3ContentStore
  private var catalog: Catalog { store.catalog }
  /// Addresses this write uploaded to that no row will name: removed after the commit.
  private var unused: [BlobAddress] = []
  private var uploaded: BlobAddress?
  /// The address a healed quarantined row named before: condemned, deleted after the commit.
  private var replaced: BlobAddress?
  /// Whether the row now names our upload.
  private var claimed = false
  private var attempt = 1

  init(staged: StagedBlob, store: S3ContentStore, faults: FaultInjector) throws {
    self.staged = staged
    self.store = store
    let seen = try catalog.read(snapshot: false) { db in
      let row = try db.row(Self.blobRow, [staged.sha256])
      return (known: row != nil, quarantined: row?.int("quarantined") == 1)
    }
    if !seen.known || seen.quarantined { try upload() }
    try faults.hit(.afterLink)
  }

  private func upload() throws {
    if let previous = uploaded { unused.append(previous) }
    let address = BlobAddress(hex: staged.sha256Hex, fence: try BlobFences.next(catalog))
    try store.publish(staged, at: address)
    uploaded = address
  }

  /// A remote blob's row, and whether files of it are quarantined (1) or not (0): one
  /// statement, one round trip.
  static let blobRow = """
    SELECT md5, crc32c, fence, CASE WHEN EXISTS (
      SELECT 1 FROM files WHERE files.blob_sha256 = blobs.sha256 AND files.quarantined = 1) THEN 1 ELSE 0 END AS quarantined
    FROM blobs WHERE sha256 = ?
    """

  var blobRowQuery: String { Self.blobRow }

  func link(existing: Row?, md5: [UInt8]?, crc32c: Int64?, now: Date, in db: Database) throws {
    (replaced, claimed) = (nil, false)
    if let existing {
      guard existing.int("quarantined") == 1 else { return }
      // `verify --repair` found the bytes missing or corrupt: ours (verified) heal the files.
      // The row moves to our fence; the old address is condemned like an orphan's.
      guard let uploaded, try BlobFences.mayCommit(uploaded, in: db) else { throw NeedsUpload() }
      let old = BlobAddress(hex: staged.sha256Hex, fence: existing.int("fence") ?? 0)
      try db.execute("UPDATE blobs SET fence = ? WHERE sha256 = ?", [uploaded.fence, staged.sha256])
      try db.execute("UPDATE files SET quarantined = 0 WHERE blob_sha256 = ?", [staged.sha256])
      try BlobDeletions.record([old], in: db)
      (replaced, claimed) = (old, true)
    } else {
      guard let uploaded, try BlobFences.mayCommit(uploaded, in: db) else { throw NeedsUpload() }
      // DO NOTHING: a writer of the same new content that committed first is referenced
      // instead of failing this write.
      try db.execute(
        """
        INSERT INTO blobs(sha256, size, created_at, md5, crc32c, fence) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT(sha256) DO NOTHING
        """,
        [staged.sha256, staged.size, now, md5, crc32c, uploaded.fence])
      claimed = db.changes > 0
    }
  }

  /// Nothing was placed inside the transaction.
  func undoInsideTransaction() {}

  func recover(from error: any Error, reachedCommit: Bool) throws {
    if error is NeedsUpload, attempt < Self.attempts {
      attempt += 1
      return try upload()
    }
    // Rolled back for sure: no row names what we uploaded (best effort; else a stray).
    if !reachedCommit {
      for address in unused + [uploaded].compactMap({ $0 }) { try? store.remove(address) }
    }
    if error is NeedsUpload {
      throw LarderError.blobStoreUnavailable(
        "content \(staged.sha256Hex) was collected under \(Self.attempts) uploads in a row")
    }
    throw error
  }

  /// Best effort, after the commit: what is left is a stray the collector reclaims. Nothing
  /// can name these addresses: their fences were ours alone.
  func committed() {
    if let uploaded, !claimed { unused.append(uploaded) }
    for address in unused { try? store.remove(address) }
    if let replaced { try? BlobDeletions.finish([replaced], store: store) }
  }
}
