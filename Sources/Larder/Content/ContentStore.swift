import Foundation

/// The one seam between a store and its bytes (containerd's content store): the write path,
/// reads, recovery, the collector and the verifier act on it, whatever holds the bytes
/// (ARCHITECTURE.md, "Content stores").
///
/// Two implementations, chosen once when a store opens (``Larder``):
/// - ``LocalContentStore``: files under `blobs/` that it alone places, reads and removes,
///   linked inside the catalog's write transaction, so whatever is decided under the write
///   lock is final; a deleted blob's file moves to `trash/` inside the transaction that deletes
///   its row.
/// - `S3ContentStore` (`LarderS3Store`, opened by `StoreBackends.s3`): objects in a bucket,
///   published *before* the catalog transaction and deleted only through committed intents at
///   fenced addresses, with no network call while a catalog lock is held.
///
/// ```swift
/// let ingest = try larder.content.ingest(staged, faults: .none)  // before the write transaction
/// let removed = try larder.content.removeUnreferenced(candidates, faults: .none)
/// let leftovers = try larder.content.recover(dryRun: false)      // what a crashed collection left
/// ```
package protocol ContentStore: StoreIdentityRecording {
  /// Where the bytes are, for logs and reports: a directory, or an `s3://` URL without credentials.
  var location: String { get }

  /// Where an address's bytes are, as reports name it.
  func place(of address: BlobAddress) -> String

  /// Where the committed bytes of `sha256` were looked for, as a missing-content error names it.
  func location(of sha256: [UInt8]) -> String

  // MARK: the write path (``FileStore``'s one commit)

  /// Starts committing `staged`, before the catalog's write transaction: whatever must be done
  /// with no lock held is done here (a remote store publishes new content now, to a fresh
  /// fence). The returned ingest acts inside that transaction and after it.
  /// - Throws: the store's errors (an upload that failed); nothing is committed then.
  func ingest(_ staged: StagedBlob, faults: FaultInjector) throws -> any ContentIngest

  // MARK: reading

  /// Streams `range` of the committed content of `sha256` (all of it when nil; clamped to its
  /// size) to `body`, a bounded chunk at a time, from wherever its row says it is.
  /// - Throws: an I/O error with `ENOENT` when the bytes (or their row) are missing, the store's
  ///   errors, what `body` threw.
  func read(_ sha256: [UInt8], range: Range<Int64>?, _ body: (UnsafeRawBufferPointer) throws -> Void) throws

  // MARK: recovering, collecting and verifying

  /// Settles what an interrupted collection left: bytes moved aside whose row survived go back,
  /// bytes no row names any more go (trash entries; deletions whose intents committed). Call
  /// it holding the collector lock (``CollectorLock``). With `dryRun`, nothing is changed and
  /// the answer is what a real run would do now.
  func recover(dryRun: Bool) throws -> ContentRecovery

  /// Deletes the `blobs` rows of `candidates` (digests) that no file uses, in one write
  /// transaction keyed by each candidate's content (``UnreferencedBlobs``), and their bytes
  /// (with that transaction or after it, as the store's protocol requires). A failure leaves
  /// every row with its bytes, or work that the next ``recover(dryRun:)`` completes.
  /// - Returns: the rows removed and their bytes.
  func removeUnreferenced(_ candidates: [[UInt8]], faults: FaultInjector) throws -> (blobs: Int, bytes: Int64)

  /// Calls `body` with batches of stored content that no row names. Where a commit may be on
  /// its way (content published before its row), only content stored before `oldest` is
  /// judged. With `remove`, each stray that can be removed safely now is removed.
  func forEachStray(olderThan oldest: Date, remove: Bool, _ body: ([ContentStray]) throws -> Void) throws

  /// What is stored at `address`, nil when nothing is.
  func inspect(_ address: BlobAddress) throws -> StoredContent?

  /// The SHA-256 (and the MD5 when `md5`) of the stored bytes, streamed through `buffer`; nil
  /// when reading them back is a download that only a `deep` check asks for (a local file is
  /// always read).
  func digest(_ address: BlobAddress, md5: Bool, deep: Bool, buffer: inout [UInt8]) throws -> ContentDigest?

  /// Whether `address` is still missing, asked inside the write transaction that would act on
  /// it: a store whose writers publish under that lock checks again; one whose writers publish
  /// before it relies on the check made before the transaction and on the row's fence.
  func isStillMissingUnderLock(_ address: BlobAddress) -> Bool

  /// Takes a corrupt blob out of service, if its row still names `address`: its files are
  /// marked quarantined (a row no file needs is dropped) and its bytes are moved aside or
  /// condemned. Returns whether it acted.
  func quarantine(_ address: BlobAddress) throws -> Bool

  /// Sets stored bytes back to read-only; false when that failed or does not apply.
  func restoreReadOnly(_ address: BlobAddress) -> Bool

  /// How a row's missing bytes are described in a report.
  var missingDescription: String { get }
}

/// What ``ContentStore/recover(dryRun:)`` settled (or would), by place.
package struct ContentRecovery: Sendable, Equatable {
  /// Bytes put back at their address: a collection moved them aside and its delete of their
  /// row never committed.
  package var restored: [String] = []
  /// Leftovers removed: moved aside for a delete that committed, or nothing a row can name.
  package var removed: [String] = []
  /// Deletions a collection committed (an intent per address) and did not carry out.
  package var finished: [String] = []

  package init(restored: [String] = [], removed: [String] = [], finished: [String] = []) {
    self.restored = restored
    self.removed = removed
    self.finished = finished
  }
}

/// One commit's content on its way into the store (``ContentStore/ingest(_:faults:)``), from
/// before the catalog's write transaction to after it. ``FileStore``'s one commit drives it:
///
/// 1. `ingest(_:faults:)`, with no transaction open;
/// 2. inside the write transaction, the `blobs` row is read with ``blobRowQuery``, then
///    ``link(existing:md5:crc32c:now:in:)`` makes sure that the row the transaction commits
///    names bytes durably in place (I1), before the `files` row is inserted;
/// 3. a failure: ``undoInsideTransaction()`` when the transaction's body threw (still under the
///    write lock), then ``recover(from:reachedCommit:)``, which returns to run the transaction
///    again or throws to give up;
/// 4. ``committed()`` once the COMMIT returned.
package protocol ContentIngest: AnyObject {
  /// The `SELECT` of the content's `blobs` row (one `?`: its SHA-256), with at least `md5` and
  /// `crc32c`: what ``link(existing:md5:crc32c:now:in:)`` is handed as `existing`.
  var blobRowQuery: String { get }

  /// Inside the write transaction: the row `existing` (nil: none) names durable bytes once this
  /// returns, or the row is inserted now at bytes that are (with the checksums given); a row
  /// whose bytes were quarantined is healed by the staged copy.
  /// - Throws: the store's errors; an error that ``recover(from:reachedCommit:)`` answers with
  ///   a retry (the bytes must be published again first).
  func link(existing: Row?, md5: [UInt8]?, crc32c: Int64?, now: Date, in db: Database) throws

  /// Inside the write transaction, after its body threw: undoes what ``link(existing:md5:crc32c:now:in:)``
  /// placed, before any other writer can see it.
  func undoInsideTransaction()

  /// After the write transaction failed with `error`; `reachedCommit`: the body finished, so
  /// the failure may be the COMMIT's (which may still have landed). Returns to run the
  /// transaction again (having published what it needs), or throws to give up (having removed
  /// what no row can name).
  func recover(from error: any Error, reachedCommit: Bool) throws

  /// After the COMMIT: best-effort cleanup of bytes no committed row names.
  func committed()
}

/// Stored content as ``ContentStore/inspect(_:)`` finds it.
package struct StoredContent {
  package var size: Int64
  /// False for anything but a plain file of bytes (a directory, a symlink, a device).
  package var isRegular: Bool
  /// Permission bits where the store has them.
  package var mode: mode_t?

  package init(size: Int64, isRegular: Bool, mode: mode_t?) {
    self.size = size
    self.isRegular = isRegular
    self.mode = mode
  }
}

/// Digests of stored bytes.
package struct ContentDigest {
  package var sha256: [UInt8]
  package var md5: [UInt8]?
  package var bytes: Int64

  package init(sha256: [UInt8], md5: [UInt8]?, bytes: Int64) {
    self.sha256 = sha256
    self.md5 = md5
    self.bytes = bytes
  }
}

/// Stored content that no `blobs` row names.
package struct ContentStray {
  /// The digest its address claims, when it is at a well-formed address.
  package var hex: String?
  package var place: String
  package var size: Int64
  /// Why it is a stray.
  package var detail: String
  /// Whether it can be removed safely now (a directory cannot; a remote address above the
  /// fence floor cannot yet).
  package var removable: Bool
  /// Whether this call removed it.
  package var removed: Bool
  /// Whether its bytes are what a write leaves when it dies before its commit (reclaimable
  /// space), rather than a fault.
  package var reclaimable: Bool

  package init(
    hex: String?, place: String, size: Int64, detail: String, removable: Bool, removed: Bool, reclaimable: Bool
  ) {
    self.hex = hex
    self.place = place
    self.size = size
    self.detail = detail
    self.removable = removable
    self.removed = removed
    self.reclaimable = reclaimable
  }
}

/// The collector's delete of unreferenced `blobs` rows, the same for every store.
package enum UnreferencedBlobs {
  /// Digests per statement: every batch runs the same prepared statement (a short last chunk
  /// repeats its last digest).
  package static let chunk = 50

  /// The keys a deleting transaction holds: one per candidate, so that a writer deduping
  /// against a candidate (which holds that content's key) and this delete never interleave,
  /// while writers of any other content commit beside it.
  package static func keys(_ candidates: [[UInt8]]) -> [WriteKey] { candidates.map { .content(sha256: $0) } }

  /// Deletes, inside the caller's transaction (keyed by ``keys(_:)``), the rows of `candidates`
  /// that no file uses, returning `columns` of each. Only candidates: a row this transaction
  /// holds no key for may be one a writer is deduping against right now.
  ///
  /// Nothing is deleted while a backup's snapshot pin is live (``SnapshotPins``): the check is
  /// in the deleting statement, under the write lock, so a pin committed before this
  /// transaction is seen, and a deletion committed before the pin is already absent from the
  /// snapshot the backup takes after pinning.
  package static func delete(_ candidates: [[UInt8]], returning columns: String, in db: Database) throws -> [Row] {
    let sql = """
      DELETE FROM blobs WHERE sha256 IN (\(Array(repeating: "?", count: chunk).joined(separator: ", ")))
      AND NOT EXISTS (SELECT 1 FROM files WHERE files.blob_sha256 = blobs.sha256)
      AND NOT EXISTS (SELECT 1 FROM snapshot_pins WHERE expires_at > ?)
      RETURNING \(columns)
      """
    let now = Date()
    var rows: [Row] = []
    var start = 0
    while start < candidates.count {
      var slice = Array(candidates[start..<min(start + chunk, candidates.count)])
      while slice.count < chunk, let last = slice.last { slice.append(last) }
      rows += try db.rows(sql, slice as [any SQLBindable] + [now])
      start += chunk
    }
    return rows
  }
}
