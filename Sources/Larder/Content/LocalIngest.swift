import Foundation

/// An optional ability of a content store: its committed bytes are files of the data directory,
/// which a download may hand to `sendfile` (discovered once by ``FileStore``, as tusd's composer
/// discovers a data store's abilities).
protocol LocalFileContent: Sendable {
  /// Opens the committed bytes of `sha256`.
  /// - Throws: ``LarderError/io(operation:path:errno:)`` (`ENOENT`) when the file is missing.
  func open(sha256: [UInt8]) throws -> BlobReader
}

/// One commit's content into ``LocalContentStore``: the staged file is hard-linked into
/// `blobs/` *inside* the write transaction, right after the dedupe decision, so the decision and
/// the link are one step under the write lock (ARCHITECTURE.md, "Invariants and the write path").
///
/// - No row: the file is linked (replacing a crash's leftover), the directory fsync'ed
///   (``BlobStore/place(_:)``), and only then is the row inserted (I1).
/// - A row whose file is gone (quarantined by `verify --repair`, or lost): the verified staged
///   copy is linked in its place and the row's files read again.
/// - A row with its file: nothing to place (dedupe); the staged copy is dropped after the commit.
///
/// A failure inside the transaction unlinks the link while the write lock still keeps every
/// other writer out; a COMMIT that failed may still have landed, so its link is unlinked only
/// if no row claims it (rechecked under a new transaction).
final class LocalIngest: ContentIngest {
  private let staged: StagedBlob
  private let blobs: BlobStore
  private let catalog: Catalog
  private let faults: FaultInjector
  /// What this write linked into `blobs/`, until a failure unlinks it.
  private var placed: String?

  init(staged: StagedBlob, blobs: BlobStore, catalog: Catalog, faults: FaultInjector) {
    self.staged = staged
    self.blobs = blobs
    self.catalog = catalog
    self.faults = faults
  }

  var blobRowQuery: String { "SELECT md5, crc32c FROM blobs WHERE sha256 = ?" }

  func link(existing: Row?, md5: [UInt8]?, crc32c: Int64?, now: Date, in db: Database) throws {
    if existing == nil {
      placed = try blobs.place(staged)
      try faults.hit(.afterLink)
      try db.execute(
        "INSERT INTO blobs(sha256, size, created_at, md5, crc32c) VALUES (?, ?, ?, ?, ?)",
        [staged.sha256, staged.size, now, md5, crc32c])
    } else if !POSIX.exists(blobs.path(for: staged.sha256)) {
      placed = try blobs.place(staged)
      try faults.hit(.afterLink)
      try db.execute("UPDATE files SET quarantined = 0 WHERE blob_sha256 = ?", [staged.sha256])
    }
  }

  /// Still under the write lock: no other writer can have seen the linked file.
  func undoInsideTransaction() {
    if let linked = placed { POSIX.unlink(linked) }
    placed = nil
  }

  /// The COMMIT itself failed (the body's own failures unlinked already). It may still have
  /// landed (an fsync error after the log was written): recheck under a new transaction and
  /// unlink only a file no row claims. A resumable upload's file is linked here, and stays
  /// resumable only once this link is gone (see `UploadSession.load`).
  func recover(from error: any Error, reachedCommit: Bool) throws {
    if let linked = placed { unlinkUnlessRecorded(linked) }
    placed = nil
    throw error
  }

  func committed() {}

  /// Unlinks `path` (a blob file this write linked) unless a `blobs` row records it. Best
  /// effort: a leftover is a stray that `gc` reclaims.
  private func unlinkUnlessRecorded(_ path: String) {
    _ = try? catalog.write { db in
      guard try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [staged.sha256]) == nil else { return }
      if POSIX.unlink(path) { try? POSIX.fsyncDirectory((path as NSString).deletingLastPathComponent) }
    }
  }
}
