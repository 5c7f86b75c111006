import Foundation
import LarderCrypto

/// Puts content in, gets `File`s out, and reads them back.
///
/// ```swift
/// let file = try larder.files.put(Data("hello".utf8), filename: "hello.txt")
/// let bytes = try larder.files.data(of: file, maxSize: 1 << 20)
/// ```
public struct FileStore: Sendable {
  let catalog: Catalog
  /// The data directory's temp, upload and (in filesystem mode) blob files.
  let blobs: BlobStore
  /// Where committed bytes live: ``FilesystemBlobBackend`` over `blobs`, or S3.
  let backend: any BlobBackend
  let faults: FaultInjector
  /// Fills in the MD5 of content committed without one (see ``MD5Backfill``); nil: not in this
  /// process (the blobs wait for one that has it, or for ``md5(of:)``).
  public let md5Backfill: MD5Backfill?
  /// Reads that found their content missing from the blob store (``LarderError/contentMissing(sha256:location:)``).
  let missingContent = EventCounter()

  /// How many reads since the store opened found their content missing from the blob store:
  /// each is an object answering an error until its bytes are uploaded again (`/metrics`).
  public var missingContentReadCount: Int { missingContent.value }

  /// Content up to this size without a client MD5 gets its MD5 at commit (reading back the
  /// staged file, still in the page cache: ~15 ms at 8 MiB), so its `md5Hash` is in the upload's
  /// answer as before; larger content is committed without and hashed by ``md5Backfill``.
  public static let inlineMD5Limit: Int64 = 8 << 20

  /// Starts a streaming write; pass the writer's ``BlobWriter/finish()`` result to ``commit(_:filename:declaredContentType:)``.
  /// - Throws: ``LarderError/diskFull`` while a full disk has spent the reserve (see ``SpaceReserve``),
  ///   here or from any write.
  public func makeWriter(options: BlobWriter.Options = .init()) throws -> BlobWriter {
    try blobs.makeWriter(options: options, reserve: catalog.reserve)
  }

  /// Stores `data` and returns its new `File`.
  public func put(
    _ data: Data, filename: String? = nil, declaredContentType: String? = nil, options: BlobWriter.Options = .init()
  ) throws -> File {
    let writer = try makeWriter(options: options)
    try writer.write(data)
    return try commit(try writer.finish(), filename: filename, declaredContentType: declaredContentType)
  }

  /// Stores the contents of a local file, streaming it in 1 MiB chunks.
  public func put(
    contentsOf url: URL, filename: String? = nil, declaredContentType: String? = nil,
    options: BlobWriter.Options = .init(), progress: ((Int64) -> Void)? = nil
  ) throws -> File {
    let writer = try makeWriter(options: options)
    let reader = try BlobReader(path: url.path)
    try reader.forEachChunk { chunk in
      try writer.write(chunk)
      progress?(writer.byteCount)
    }
    return try commit(
      try writer.finish(), filename: filename ?? url.lastPathComponent, declaredContentType: declaredContentType)
  }

  /// Stores bytes arriving as an asynchronous sequence of chunks.
  public func put<Chunks: AsyncSequence>(
    _ chunks: Chunks, filename: String? = nil, declaredContentType: String? = nil,
    options: BlobWriter.Options = .init()
  ) async throws -> File where Chunks.Element == Data {
    let writer = try makeWriter(options: options)
    do {
      for try await chunk in chunks {
        try Task.checkCancellation()
        try writer.write(chunk)
      }
    } catch {
      writer.cancel()
      throw error is CancellationError ? LarderError.cancelled : error
    }
    return try commit(try writer.finish(), filename: filename, declaredContentType: declaredContentType)
  }

  /// Whether committed bytes are files of the data directory (downloads may `sendfile` them
  /// through ``open(_:)``); false when they live in S3 (stream them with ``read(_:range:_:)``).
  public var blobsAreLocal: Bool { backend.publishesInsideTransaction }

  /// Publishes staged content and records a new `File` in one write transaction.
  ///
  /// The dedupe decision is taken here, inside the transaction: if a `blobs` row exists the
  /// content is already durable and the staged copy is dropped; otherwise the staged file is
  /// linked into place, its directory fsync'ed, and the row inserted. With S3 nothing remote
  /// happens inside the transaction: new content is uploaded before it, to a fresh fence
  /// (``BlobFences``), and the transaction inserts the row at that fence, or references the row
  /// that exists by then (ARCHITECTURE §11). `then` runs in the same
  /// transaction to add the rows that reference the file (an object, an attachment); if it
  /// throws, nothing is committed. `package`: the closure sees the SQL connection, which apps
  /// never do; the server and the store's own object and model writes use it.
  ///
  /// The transaction is keyed (``WriteKey``) by the content, plus `keys`, which must name what
  /// `then` reads and changes (the object's name, the upload it completes); on PostgreSQL
  /// commits of different contents and names run together.
  package func commit<T>(
    _ staged: StagedBlob, filename: String? = nil, declaredContentType: String? = nil, keys: [WriteKey] = [],
    then: (Database, File) throws -> T
  ) throws -> T {
    defer { staged.discard() }
    try faults.hit(.afterStage)
    // Small content keeps its MD5 known from the start, outside the write lock: from the local
    // file. An upload assembled in the shared store would be read back whole over the network
    // before the answer; its MD5 is left to the backfill.
    // The CRC32C (GCS's) comes in the same read, whether or not the MD5 was known.
    if staged.size <= Self.inlineMD5Limit, staged.assembledUpload == nil {
      try staged.computeChecksums()
    }
    guard backend.publishesInsideTransaction else {
      return try commitRemote(staged, filename, declaredContentType, keys, then)
    }
    // What the blob row says once committed: nil leaves it to the backfill.
    var recordedMD5: [UInt8]?
    var recordedCRC32C: Int64?
    let now = Date.nowInMilliseconds
    // What this write linked into blobs/, until a failure inside the transaction unlinks it.
    var placed: String?
    let result: T
    do {
      // Content never uses the reserve: it is there so that deletes can free space.
      result = try catalog.write(keys: [.content(sha256: staged.sha256)] + keys, releasingReserve: false) { db in
        do {
          let existing = try db.row("SELECT md5, crc32c FROM blobs WHERE sha256 = ?", [staged.sha256])
          let (md5, crc32c) = try Self.settleChecksums(staged, existing: existing, db)
          recordedMD5 = md5
          recordedCRC32C = crc32c
          if existing == nil {
            placed = try blobs.place(staged)
            try faults.hit(.afterLink)
            try db.execute(
              "INSERT INTO blobs(sha256, size, created_at, md5, crc32c) VALUES (?, ?, ?, ?, ?)",
              [staged.sha256, staged.size, now, md5, crc32c])
          } else if !POSIX.exists(blobs.path(for: staged.sha256)) {
            // The row exists but its file was quarantined by `verify --repair` (or lost): the
            // verified staged copy heals it, and the files that used it read correctly again.
            placed = try blobs.place(staged)
            try faults.hit(.afterLink)
            try db.execute("UPDATE files SET quarantined = 0 WHERE blob_sha256 = ?", [staged.sha256])
          }
          return try insertFile(staged, md5: md5, crc32c: crc32c, now: now, filename, declaredContentType, db, then)
        } catch {
          // Still under the write lock: no other writer can have seen the linked file.
          if let linked = placed { POSIX.unlink(linked) }
          placed = nil
          throw error
        }
      }
    } catch {
      // The COMMIT itself failed (the body's own failures unlinked already). It may still have
      // landed (an fsync error after the log was written): recheck under a new transaction and
      // unlink only a file no row claims. A resumable upload's file is linked here, and stays
      // resumable only once this link is gone (see `UploadSession.load`).
      if let linked = placed { unlinkUnlessRecorded(linked, sha256: staged.sha256) }
      throw error
    }
    try faults.hit(.afterCommit)
    if recordedMD5 == nil || recordedCRC32C == nil { md5Backfill?.wake() }
    return result
  }

  /// How many times a remote commit uploads again after its fence went stale (a collector
  /// deleted the row it meant to reference, or raised the floor past its fence) before giving up.
  static let remoteAttempts = 3

  /// Thrown inside a remote commit's transaction when it needs bytes at a fresh fence first:
  /// the transaction rolls back, the upload happens with no lock held, and the commit retries.
  private struct NeedsUpload: Error {}

  /// ``commit(_:filename:declaredContentType:then:)`` with the blobs in S3 (ARCHITECTURE §11).
  ///
  /// A snapshot read asks whether a row exists (and whether its files are quarantined). If not,
  /// the content goes up to `(sha256, F)` for a fresh fence F, with no catalog lock or
  /// transaction open. The write transaction then makes only catalog decisions: a row there now
  /// is referenced (our upload is an orphan, removed after the commit); else the row is inserted
  /// at F, if F is still at or above the floor. A row that vanished since the read (a
  /// collector deleted it), a floor that passed F, or a quarantined row to heal without bytes of
  /// our own roll the transaction back for an upload to a fresh fence, then a retry.
  private func commitRemote<T>(
    _ staged: StagedBlob, _ filename: String?, _ declaredContentType: String?, _ keys: [WriteKey],
    _ then: (Database, File) throws -> T
  ) throws -> T {
    let hex = staged.sha256Hex
    let seen = try catalog.read(snapshot: false) { db in
      let row = try db.row(Self.remoteBlobRow, [staged.sha256])
      return (known: row != nil, quarantined: row?.int("quarantined") == 1)
    }
    // Addresses this write uploaded to that no row will name: removed after the commit.
    var unused: [BlobAddress] = []
    var uploaded: BlobAddress?
    func upload() throws {
      if let previous = uploaded { unused.append(previous) }
      let address = BlobAddress(hex: hex, fence: try BlobFences.next(catalog))
      try backend.publish(staged, at: address)
      uploaded = address
    }
    if !seen.known || seen.quarantined { try upload() }
    try faults.hit(.afterLink)
    var recordedMD5: [UInt8]?
    var recordedCRC32C: Int64?
    var replaced: BlobAddress?
    let now = Date.nowInMilliseconds
    var attempt = 1
    // Whether the row now names our upload, and whether the transaction got as far as its
    // COMMIT (a failure before it surely rolled back; one at COMMIT may still have landed).
    var claimed = false
    var reachedCommit = false
    let result: T
    while true {
      do {
        result = try catalog.write(keys: [.content(sha256: staged.sha256)] + keys, releasingReserve: false) { db in
          (replaced, claimed, reachedCommit) = (nil, false, false)
          let existing = try db.row(Self.remoteBlobRow, [staged.sha256])
          let (md5, crc32c) = try Self.settleChecksums(staged, existing: existing, db)
          recordedMD5 = md5
          recordedCRC32C = crc32c
          if let existing {
            if existing.int("quarantined") == 1 {
              // `verify --repair` found the bytes missing or corrupt: ours (verified) heal the
              // files. The row moves to our fence; the old address is condemned like an orphan's.
              guard let uploaded, try BlobFences.mayCommit(uploaded, in: db) else { throw NeedsUpload() }
              let old = BlobAddress(hex: hex, fence: existing.int("fence") ?? 0)
              try db.execute("UPDATE blobs SET fence = ? WHERE sha256 = ?", [uploaded.fence, staged.sha256])
              try db.execute("UPDATE files SET quarantined = 0 WHERE blob_sha256 = ?", [staged.sha256])
              try BlobDeletions.record([old], in: db)
              (replaced, claimed) = (old, true)
            }
          } else {
            guard let uploaded, try BlobFences.mayCommit(uploaded, in: db) else { throw NeedsUpload() }
            // DO NOTHING: a writer of the same new content that committed first (possible once
            // writers no longer share one lock) is referenced instead of failing this write.
            try db.execute(
              """
              INSERT INTO blobs(sha256, size, created_at, md5, crc32c, fence) VALUES (?, ?, ?, ?, ?, ?)
              ON CONFLICT(sha256) DO NOTHING
              """,
              [staged.sha256, staged.size, now, md5, crc32c, uploaded.fence])
            claimed = db.changes > 0
          }
          let value = try insertFile(staged, md5: md5, crc32c: crc32c, now: now, filename, declaredContentType, db, then)
          reachedCommit = true
          return value
        }
        break
      } catch is NeedsUpload where attempt < Self.remoteAttempts {
        attempt += 1
        try upload()
      } catch {
        // Rolled back for sure: no row names what we uploaded (best effort; else a stray).
        if !reachedCommit {
          for address in unused + [uploaded].compactMap({ $0 }) { try? backend.remove(address) }
        }
        if error is NeedsUpload {
          throw LarderError.blobStoreUnavailable(
            "content \(hex) was collected under \(Self.remoteAttempts) uploads in a row")
        }
        throw error
      }
    }
    // Best effort, after the commit: what is left is a stray the collector reclaims. Nothing
    // can name these addresses: their fences were ours alone.
    if let uploaded, !claimed { unused.append(uploaded) }
    for address in unused { try? backend.remove(address) }
    if let replaced { try? BlobDeletions.finish([replaced], catalog: catalog, backend: backend) }
    try faults.hit(.afterCommit)
    if recordedMD5 == nil || recordedCRC32C == nil { md5Backfill?.wake() }
    return result
  }

  /// A remote blob's row, and whether files of it are quarantined (1) or not (0): one
  /// statement, one round trip.
  static let remoteBlobRow = """
    SELECT md5, crc32c, fence, CASE WHEN EXISTS (
      SELECT 1 FROM files WHERE files.blob_sha256 = blobs.sha256 AND files.quarantined = 1) THEN 1 ELSE 0 END AS quarantined
    FROM blobs WHERE sha256 = ?
    """

  /// The MD5 the blob row has or gets: a known one is the row's; one this write verified fills
  /// a NULL (inside the write transaction).
  private static func settleChecksums(_ staged: StagedBlob, existing: Row?, _ db: Database) throws -> (
    md5: [UInt8]?, crc32c: Int64?
  ) {
    let crc32c = staged.crc32c.map(Int64.init)
    guard let existing else { return (staged.md5, crc32c) }
    var settled: (md5: [UInt8]?, crc32c: Int64?) = (staged.md5, crc32c)
    if let known = existing.bytes("md5"), known.count == 16 {
      settled.md5 = known
    } else if let md5 = staged.md5 {
      try db.execute("UPDATE blobs SET md5 = ? WHERE sha256 = ?", [md5, staged.sha256])
    }
    if let known = existing.int("crc32c") {
      settled.crc32c = known
    } else if let crc32c {
      try db.execute("UPDATE blobs SET crc32c = ? WHERE sha256 = ?", [crc32c, staged.sha256])
    }
    return settled
  }

  /// Inserts the `files` row of `staged` and runs `then`, inside the write transaction.
  private func insertFile<T>(
    _ staged: StagedBlob, md5: [UInt8]?, crc32c: Int64?, now: Date, _ filename: String?,
    _ declaredContentType: String?, _ db: Database, _ then: (Database, File) throws -> T
  ) throws -> T {
    let file = File(
      id: FileStore.newIdentifier(), sha256: staged.sha256Hex, size: staged.size, md5: md5.map(Hex.encode) ?? "",
      contentType: staged.contentType, declaredContentType: declaredContentType.flatMap(Self.cleanType),
      filename: filename.flatMap(Self.cleanFilename), createdAt: now,
      crc32c: crc32c.map { UInt32(truncatingIfNeeded: $0) })
    try db.execute(
      """
      INSERT INTO files(id, blob_sha256, size, md5, filename, content_type, declared_content_type, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)
      """,
      [
        file.id, staged.sha256, file.size, md5 ?? [], file.filename, file.contentType, file.declaredContentType,
        now,
      ])
    let value = try then(db, file)
    try faults.hit(.beforeCommit)
    try faults.hitCommit(db, fileID: file.id)
    return value
  }

  /// `file` with its MD5 known: as recorded, or computed now from the blob (and recorded, so
  /// the backfill and later readers find it). For callers that need it at once: rules that read
  /// `md5Hash`, metadata answers for small content, `larder stat`.
  /// - Throws: an I/O error if the blob cannot be read.
  public func withMD5(_ file: File) throws -> File {
    guard file.md5.isEmpty else { return file }
    return try hashed(file)
  }

  /// `file` with its MD5 and CRC32C known: as recorded, or both computed now in one read of the
  /// blob (and recorded). For answers that must carry them (GCS's `crc32c`, `x-goog-hash`).
  /// - Throws: an I/O error if the blob cannot be read.
  public func withChecksums(_ file: File) throws -> File {
    guard file.md5.isEmpty || file.crc32c == nil else { return file }
    return try hashed(file)
  }

  /// `file` with its MD5 and CRC32C computed now in one read of the blob, and recorded for
  /// everyone (a no-op update if the row is gone or already filled).
  private func hashed(_ file: File) throws -> File {
    guard let digest = Hex.decode(file.sha256), digest.count == 32 else {
      throw LarderError.invalidArgument("malformed sha256 in file \(file.id)")
    }
    let known: (md5: [UInt8], crc32c: UInt32)
    do {
      known = try MD5Backfill(catalog: catalog, blobs: blobs, backend: backend).fillDigests(sha256: digest)
    } catch LarderError.io(_, _, let code) where code == ENOENT {
      throw try missing(file, digest: digest)
    }
    return File(
      id: file.id, sha256: file.sha256, size: file.size, md5: Hex.encode(known.md5), contentType: file.contentType,
      declaredContentType: file.declaredContentType, filename: file.filename, createdAt: file.createdAt,
      crc32c: known.crc32c)
  }

  /// Unlinks `path` (a blob file this process linked) unless a `blobs` row records it. Best
  /// effort: a leftover is a stray that `gc` reclaims.
  func unlinkUnlessRecorded(_ path: String, sha256: [UInt8]) {
    _ = try? catalog.write { db in
      guard try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [sha256]) == nil else { return }
      if POSIX.unlink(path) { try? POSIX.fsyncDirectory((path as NSString).deletingLastPathComponent) }
    }
  }

  /// Publishes staged content as a new unattached `File`.
  public func commit(_ staged: StagedBlob, filename: String? = nil, declaredContentType: String? = nil) throws -> File {
    try commit(staged, filename: filename, declaredContentType: declaredContentType) { _, file in file }
  }

  /// The file with this id, or nil.
  public func file(id: String) throws -> File? {
    try catalog.read { db in
      try db.row("SELECT \(File.columns) FROM files f WHERE f.id = ?", [id]).map(File.init(row:))
    }
  }

  /// Opens the file's content for reading (a file of the data directory: ``blobsAreLocal`` only;
  /// with S3 it throws `ENOENT`, use ``read(_:range:_:)``).
  /// - Throws: ``LarderError/corruptContent(sha256:)`` if it was quarantined, an I/O error if missing.
  public func open(_ file: File) throws -> BlobReader {
    let digest = try Self.digest(of: file)
    do {
      return try blobs.open(sha256: digest)
    } catch LarderError.io(_, _, let code) where code == ENOENT {
      throw try missing(file, digest: digest)
    }
  }

  /// Streams `range` of the file's content (all of it when nil; clamped to its size) to `body`,
  /// a bounded chunk at a time, from wherever the blobs live.
  /// - Throws: ``LarderError/corruptContent(sha256:)`` if it was quarantined, an I/O error if
  ///   missing, ``LarderError/blobStoreUnavailable(_:)``, or what `body` threw.
  public func read(_ file: File, range: Range<Int64>? = nil, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    let digest = try Self.digest(of: file)
    if blobsAreLocal {
      let reader = try open(file)
      let range = range.map { r -> Range<Int64> in
        let lower = min(max(0, r.lowerBound), reader.size)
        return lower..<max(lower, min(r.upperBound, reader.size))
      }
      return try reader.forEachChunk(in: range, body)
    }
    // The row's fence names the object; a file's row cannot go while the file exists (its
    // foreign key), but healing a quarantine moves it to a new fence: on a miss, look once more.
    var address = try remoteAddress(of: digest)
    for _ in 0..<2 {
      guard let current = address else { break }
      do {
        return try backend.read(current, range: range, body)
      } catch LarderError.io(_, _, let code) where code == ENOENT {
        let again = try remoteAddress(of: digest)
        address = again == current ? nil : again
      }
    }
    throw try missing(file, digest: digest)
  }

  /// Where the bytes of a remote blob are now: its row's fence (nil: no row).
  func remoteAddress(of digest: [UInt8]) throws -> BlobAddress? {
    try catalog.read(snapshot: false) { db in
      try db.row("SELECT fence FROM blobs WHERE sha256 = ?", [digest])?.int("fence").map {
        BlobAddress(sha256: digest, fence: $0)
      }
    }
  }

  private static func digest(of file: File) throws -> [UInt8] {
    guard let digest = Hex.decode(file.sha256), digest.count == 32 else {
      throw LarderError.invalidArgument("malformed sha256 in file \(file.id)")
    }
    return digest
  }

  /// Why a file's bytes are not there: quarantined by `verify --repair`, or lost.
  private func missing(_ file: File, digest: [UInt8]) throws -> LarderError {
    let quarantined = try catalog.read { db in
      try db.row("SELECT 1 FROM files WHERE blob_sha256 = ? AND quarantined = 1", [digest]) != nil
    }
    if quarantined { return LarderError.corruptContent(sha256: file.sha256) }
    missingContent.add()
    return LarderError.contentMissing(
      sha256: file.sha256, location: blobsAreLocal ? blobs.path(for: digest) : backend.location)
  }

  /// All of a file's bytes, refusing before reading anything when it is larger than `maxSize`.
  /// - Throws: ``LarderError/downloadSizeExceeded(size:maxSize:)``.
  public func data(of file: File, maxSize: Int64? = nil) throws -> Data {
    if let maxSize, file.size > maxSize {
      throw LarderError.downloadSizeExceeded(size: file.size, maxSize: maxSize)
    }
    guard blobsAreLocal else {
      var data = Data()
      try read(file) { data.append(contentsOf: $0) }
      return data
    }
    let reader = try open(file)
    if let maxSize, reader.size > maxSize {
      throw LarderError.downloadSizeExceeded(size: reader.size, maxSize: maxSize)
    }
    return try reader.read(0..<reader.size)
  }

  /// The bytes of `range` (clamped to the file).
  public func data(of file: File, range: Range<Int64>) throws -> Data {
    guard blobsAreLocal else {
      var data = Data()
      try read(file, range: range) { data.append(contentsOf: $0) }
      return data
    }
    return try open(file).read(range)
  }

  /// Time-ordered unique identifiers: 12 hex digits of milliseconds, then 16 random.
  static func newIdentifier() -> String {
    let ms = UInt64(Date().timeIntervalSince1970 * 1000)
    let time = String(ms, radix: 16)
    return String(repeating: "0", count: max(0, 12 - time.count)) + time + SecureRandom.hexIdentifier(byteCount: 8)
  }

  /// A declared MIME type, kept only if it is printable and short.
  static func cleanType(_ type: String) -> String? {
    // The usual case (printable ASCII, no space at either end) needs no trimming: Foundation's
    // `trimmingCharacters` cost about 80k instructions a call, 2 % of a small upload's CPU.
    let bytes = type.utf8
    if let first = bytes.first, let last = bytes.last, first != 0x20, last != 0x20, bytes.count <= 255,
      bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f })
    {
      return type
    }
    let trimmed = type.trimmingCharacters(in: .whitespaces)
    guard !trimmed.isEmpty, trimmed.utf8.count <= 255,
      trimmed.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7f })
    else { return nil }
    return trimmed
  }

  static func cleanFilename(_ name: String) -> String? {
    let base = name.split(separator: "/").last.map(String.init) ?? name
    guard !base.isEmpty, base.utf8.count <= 1024, !base.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f })
    else { return nil }
    return base
  }
}
