import Foundation
import Larder
import LarderCrypto
internal import LarderS3

/// Content as objects of one bucket in an S3-compatible store, keyed
/// `[prefix/]sha256/ab/cd/<hex>[.<fence>]` (``BlobAddress/key``), at fenced addresses
/// (ARCHITECTURE.md, "Fenced deletion", ``BlobFences``). The store sees only ``ContentStore``
/// (and ``SharedUploadStorage`` for resumable uploads' bytes); the bucket's calls stay in this
/// module (`S3ContentStore+Bucket.swift`).
///
/// Writers publish bytes *before* the catalog transaction that commits their row, each to a
/// fresh fence (``FencedIngest``), so an address without a row may be a commit on its way: strays are judged only
/// below the fence floor and past an age. Bytes are deleted only after a committed deletion
/// intent, with no transaction open: no network call ever waits under a catalog lock, and a
/// DELETE that is late or repeated removes nothing a row names.
package struct S3ContentStore: ContentStore {
  let catalog: Catalog
  let client: S3Client
  /// Prepended to every key (`""`, or `P/` from the URL's `prefix=P`): several stores in one bucket.
  let keyPrefix: String

  /// Connects to the bucket named by `url` (`s3://BUCKET?endpoint=…&region=…&path-style=1`),
  /// with credentials from `credentialsFile` when given, else from `AWS_ACCESS_KEY_ID` and
  /// `AWS_SECRET_ACCESS_KEY` in `environment`. Nothing is sent until the first call.
  ///
  /// - Throws: a configuration error naming what is wrong with the URL or the credentials.
  package init(
    url: String, credentialsFile: String? = nil, catalog: Catalog,
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) throws {
    let (clientURL, prefix) = try Self.splitPrefix(url)
    keyPrefix = prefix.map { $0 + "/" } ?? ""
    client = S3Client(
      configuration: try S3Configuration(url: clientURL),
      credentials: try S3Credentials.resolve(file: credentialsFile, environment: environment))
    self.catalog = catalog
  }

  package func place(of address: BlobAddress) -> String { "\(location) \(address.key)" }

  package func location(of sha256: [UInt8]) -> String { location }

  /// Publishes new content (or content whose files are quarantined) now, with no lock held.
  package func ingest(_ staged: StagedBlob, faults: FaultInjector) throws -> any ContentIngest {
    try FencedIngest(staged: staged, store: self, faults: faults)
  }

  /// The row's fence names the object; a row cannot go while a file uses it (its foreign key),
  /// but healing a quarantine moves it to a new fence: on a miss, look once more.
  package func read(_ sha256: [UInt8], range: Range<Int64>?, _ body: (UnsafeRawBufferPointer) throws -> Void)
    throws
  {
    var address = try address(of: sha256)
    for _ in 0..<2 {
      guard let current = address else { break }
      do {
        return try readObject(current, range: range, body)
      } catch LarderError.io(_, _, let code) where code == ENOENT {
        let again = try self.address(of: sha256)
        address = again == current ? nil : again
      }
    }
    throw LarderError.io(operation: "read", path: Hex.encode(sha256), errno: ENOENT)
  }

  /// Where the bytes of `sha256` are now: its row's fence (nil: no row).
  func address(of sha256: [UInt8]) throws -> BlobAddress? {
    try catalog.read(snapshot: false) { db in
      try db.row("SELECT fence FROM blobs WHERE sha256 = ?", [sha256])?.int("fence").map {
        BlobAddress(sha256: sha256, fence: $0)
      }
    }
  }

  package var missingDescription: String { "the blob's object is missing" }

  /// Intents a collector committed and did not finish (it died, or its session did, between
  /// the intents' commit and their removal), or that one running beside this one has not
  /// finished yet: a DELETE sent twice is harmless. Nothing is ever moved aside to restore.
  package func recover(dryRun: Bool) throws -> ContentRecovery {
    ContentRecovery(finished: try BlobDeletions.finishLeftovers(store: self, dryRun: dryRun).map(\.key))
  }

  /// In two phases. A: one short write transaction deletes the rows still unreferenced
  /// (`RETURNING` their fences: each row is counted by the one collector whose DELETE removed
  /// it) and commits a deletion intent per address. B: with no transaction or lock open, the
  /// objects are DELETEd, then the intents. A collector that dies, or whose session or lock is
  /// lost, anywhere in B leaves intents for the next run; a writer meanwhile finds no row and
  /// uploads to a fresh fence, which none of these DELETEs (late, or repeated) can touch.
  package func removeUnreferenced(_ candidates: [[UInt8]], faults: FaultInjector) throws -> (blobs: Int, bytes: Int64) {
    let (condemned, bytes) = try catalog.write(keys: UnreferencedBlobs.keys(candidates)) {
      db -> ([BlobAddress], Int64) in
      let rows = try UnreferencedBlobs.delete(candidates, returning: "sha256, size, fence", in: db)
      let addresses = rows.compactMap { row in
        row.bytes("sha256").map { BlobAddress(sha256: $0, fence: row.int("fence") ?? 0) }
      }
      try BlobDeletions.record(addresses, in: db)
      return (addresses, rows.reduce(0) { $0 + ($1.int("size") ?? 0) })
    }
    try faults.hit(.gcAfterTrash)
    try BlobDeletions.finish(condemned, store: self) { try faults.hit(.gcMidBatch) }
    try faults.hit(.gcAfterCommit)
    return (condemned.count, bytes)
  }

  /// Stored addresses no row (nor intent) names, stored before `oldest`. Only those below the
  /// floor are removable: no writer can commit such an address any more, so deleting it needs
  /// no lock. With `remove` the floor is raised first (``BlobFences/raiseFloor(_:now:age:)``),
  /// and each removable stray is condemned by an intent, so two collectors never both count it.
  package func forEachStray(olderThan oldest: Date, remove: Bool, _ body: ([ContentStray]) throws -> Void) throws {
    let now = Date()
    let floor =
      remove
      ? try BlobFences.raiseFloor(catalog, now: now, age: max(0, now.timeIntervalSince(oldest)))
      : try catalog.read { db in try BlobFences.floor(db) }
    var pending: [(address: BlobAddress, size: Int64)] = []
    func settle() throws {
      defer { pending.removeAll(keepingCapacity: true) }
      let strays = try BlobDeletions.strays(pending, floor: .max, catalog: catalog)
      var removed: Set<BlobAddress> = []
      if remove {
        let dead = strays.filter { $0.address.fence < floor }
        removed = Set(try BlobDeletions.removeStrays(dead, store: self).map(\.address))
      }
      try body(
        strays.map { stray in
          ContentStray(
            hex: stray.address.hex, place: place(of: stray.address), size: stray.size,
            detail: "no blobs row names it", removable: stray.address.fence < floor,
            removed: removed.contains(stray.address), reclaimable: true)
        })
    }
    try forEachStoredBlob(dated: { address, size, stored in
      guard stored < oldest else { return }
      pending.append((address, size))
      if pending.count >= 500 { try settle() }
    })
    if !pending.isEmpty { try settle() }
  }

  /// A HEAD: an object is bytes, with no mode of its own.
  package func inspect(_ address: BlobAddress) throws -> StoredContent? {
    try storedSize(of: address).map { StoredContent(size: $0, isRegular: true, mode: nil) }
  }

  /// A download: only when asked to go deep (otherwise ``inspect(_:)``'s HEAD is the check).
  package func digest(_ address: BlobAddress, md5: Bool, deep: Bool, buffer: inout [UInt8]) throws -> ContentDigest?
  {
    guard deep else { return nil }
    let digest = Digest(.sha256)
    let md5Digest = md5 ? Digest(.md5) : nil
    var bytes: Int64 = 0
    try readObject(address, range: nil) {
      digest.update($0)
      md5Digest?.update($0)
      bytes += Int64($0.count)
    }
    return ContentDigest(sha256: digest.finalize(), md5: md5Digest?.finalize(), bytes: bytes)
  }

  /// No S3 call under the lock: the caller checked before its transaction, and inside it the
  /// row must still name this fence (a writer that healed it moved the row to a new one).
  package func isStillMissingUnderLock(_ address: BlobAddress) -> Bool { true }

  /// The corrupt object is condemned by a deletion intent in the transaction that marks its
  /// files, and deleted after it, so the next upload of that content goes to a fresh fence and
  /// heals the files.
  package func quarantine(_ address: BlobAddress) throws -> Bool {
    let condemned = try catalog.write { db -> Bool in
      // Only if the row still names these bytes (a writer may have healed it meanwhile).
      guard
        try db.row("SELECT 1 FROM blobs WHERE sha256 = ? AND fence = ?", [address.sha256, address.fence])
          != nil
      else { return false }
      try ContentQuarantine.mark(address.sha256, in: db)
      try BlobDeletions.record([address], in: db)
      return true
    }
    if condemned { try BlobDeletions.finish([address], store: self) }
    return true
  }

  package func restoreReadOnly(_ address: BlobAddress) -> Bool { false }
}

extension StoreBackends {
  /// Blobs in an S3-compatible bucket (``BlobLocation/s3(url:credentialsFile:)``).
  public static let s3 = StoreBackends(s3: { try S3ContentStore(url: $0, credentialsFile: $1, catalog: $2) })
}
