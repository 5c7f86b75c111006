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
  /// The data directory's temp files, where writes stage their bytes.
  let blobs: BlobStore
  /// Where committed bytes live, and how a commit puts them there (``ContentStore``).
  let content: any ContentStore
  /// The content as local files a download may `sendfile`, when it is (an optional ability of
  /// `content`, discovered once); nil when the bytes are elsewhere (S3).
  let localFiles: (any LocalFileContent)?
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
  /// answer; larger content is committed without and hashed by ``md5Backfill``.
  public static let inlineMD5Limit: Int64 = 8 << 20

  init(
    catalog: Catalog, blobs: BlobStore, content: any ContentStore, faults: FaultInjector, md5Backfill: MD5Backfill?
  ) {
    self.catalog = catalog
    self.blobs = blobs
    self.content = content
    localFiles = content as? any LocalFileContent
    self.faults = faults
    self.md5Backfill = md5Backfill
  }

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

  /// Publishes staged content and records a new `File` in one write transaction.
  ///
  /// Invariant I1 (a reference is committed only to content durably in place, ARCHITECTURE.md,
  /// "Invariants and the write path") reads top to bottom here, whatever holds the bytes (``ContentStore``):
  /// 1. before any transaction, ``ContentStore/ingest(_:faults:)``: a store whose writers
  ///    publish before the lock (S3) uploads new content now, to a fresh fence (`FencedIngest`);
  /// 2. in the write transaction, the dedupe decision: the `blobs` row is read, its checksums
  ///    settled, and ``ContentIngest/link(existing:md5:crc32c:now:in:)`` makes the row name
  ///    durable bytes (the filesystem links the staged file here, under the write lock:
  ///    ``LocalIngest``; S3 checks the fence), healing a row whose bytes were quarantined;
  /// 3. only then the `files` row, and `then`'s rows that reference the file (an object, an
  ///    attachment); if anything throws, nothing is committed and what was placed is undone;
  /// 4. after the COMMIT, bytes no row names are cleaned up (best effort: else strays).
  ///
  /// `package`: the closure sees the SQL connection, which apps never do; the server and the
  /// store's own object and model writes use it.
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
    try staged.computeChecksumsIfLocal(upTo: Self.inlineMD5Limit)
    let ingest = try content.ingest(staged, faults: faults)
    // What the blob row says once committed: nil leaves it to the backfill.
    var recordedMD5: [UInt8]?
    var recordedCRC32C: Int64?
    let now = Date.nowInMilliseconds
    // Whether the transaction got as far as its COMMIT (a failure before it surely rolled
    // back; one at COMMIT may still have landed).
    var reachedCommit = false
    let result: T
    while true {
      do {
        // Content never uses the reserve: it is there so that deletes can free space.
        result = try catalog.write(keys: [.content(sha256: staged.sha256)] + keys, releasingReserve: false) { db in
          reachedCommit = false
          do {
            let existing = try db.row(ingest.blobRowQuery, [staged.sha256])
            let (md5, crc32c) = try Self.settleChecksums(staged, existing: existing, db)
            (recordedMD5, recordedCRC32C) = (md5, crc32c)
            try ingest.link(existing: existing, md5: md5, crc32c: crc32c, now: now, in: db)
            let value = try insertFile(staged, md5: md5, crc32c: crc32c, now: now, filename, declaredContentType, db, then)
            reachedCommit = true
            return value
          } catch {
            ingest.undoInsideTransaction()
            throw error
          }
        }
        break
      } catch {
        try ingest.recover(from: error, reachedCommit: reachedCommit)
      }
    }
    ingest.committed()
    try faults.hit(.afterCommit)
    if recordedMD5 == nil || recordedCRC32C == nil { md5Backfill?.wake() }
    return result
  }

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
      known = try MD5Backfill(catalog: catalog, content: content).fillDigests(sha256: digest)
    } catch LarderError.io(_, _, let code) where code == ENOENT {
      throw try missing(file, digest: digest)
    }
    return File(
      id: file.id, sha256: file.sha256, size: file.size, md5: Hex.encode(known.md5), contentType: file.contentType,
      declaredContentType: file.declaredContentType, filename: file.filename, createdAt: file.createdAt,
      crc32c: known.crc32c)
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

  /// Opens the file's content for reading, when the store's content is files of the data
  /// directory (a download may `sendfile` them); nil when it is not (S3: stream it with
  /// ``read(_:range:_:)``).
  /// - Throws: ``LarderError/corruptContent(sha256:)`` if it was quarantined, ``LarderError/contentMissing(sha256:location:)`` if missing.
  public func openLocal(_ file: File) throws -> BlobReader? {
    guard let localFiles else { return nil }
    let digest = try Self.digest(of: file)
    do {
      return try localFiles.open(sha256: digest)
    } catch LarderError.io(_, _, let code) where code == ENOENT {
      throw try missing(file, digest: digest)
    }
  }

  /// Opens the file's content for reading (a file of the data directory: ``openLocal(_:)``;
  /// with S3 it throws `ENOENT`, use ``read(_:range:_:)``).
  /// - Throws: ``LarderError/corruptContent(sha256:)`` if it was quarantined, an I/O error if missing.
  public func open(_ file: File) throws -> BlobReader {
    guard let reader = try openLocal(file) else {
      throw LarderError.io(operation: "open", path: content.location(of: try Self.digest(of: file)), errno: ENOENT)
    }
    return reader
  }

  /// Streams `range` of the file's content (all of it when nil; clamped to its size) to `body`,
  /// a bounded chunk at a time, from wherever the blobs live.
  /// - Throws: ``LarderError/corruptContent(sha256:)`` if it was quarantined, an I/O error if
  ///   missing, ``LarderError/blobStoreUnavailable(_:)``, or what `body` threw.
  public func read(_ file: File, range: Range<Int64>? = nil, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    let digest = try Self.digest(of: file)
    do {
      try content.read(digest, range: range, body)
    } catch LarderError.io(_, _, let code) where code == ENOENT {
      throw try missing(file, digest: digest)
    }
  }

  /// Checks, without reading the content, what a HEAD of a download answers: a local open in a
  /// data directory; elsewhere (S3) only the catalog's word, so a HEAD asks nothing of a blob
  /// store that may be down.
  /// - Throws: ``LarderError/corruptContent(sha256:)`` if `verify --repair` quarantined it,
  ///   ``LarderError/contentMissing(sha256:location:)`` if a local file is gone.
  public func requireContent(_ file: File) throws {
    if try openLocal(file) != nil { return }
    if try isQuarantined(try Self.digest(of: file)) { throw LarderError.corruptContent(sha256: file.sha256) }
  }

  private static func digest(of file: File) throws -> [UInt8] {
    guard let digest = Hex.decode(file.sha256), digest.count == 32 else {
      throw LarderError.invalidArgument("malformed sha256 in file \(file.id)")
    }
    return digest
  }

  private func isQuarantined(_ digest: [UInt8]) throws -> Bool {
    try catalog.read { db in
      try db.row("SELECT 1 FROM files WHERE blob_sha256 = ? AND quarantined = 1", [digest]) != nil
    }
  }

  /// Why a file's bytes are not there: quarantined by `verify --repair`, or lost.
  private func missing(_ file: File, digest: [UInt8]) throws -> LarderError {
    if try isQuarantined(digest) { return LarderError.corruptContent(sha256: file.sha256) }
    missingContent.add()
    return LarderError.contentMissing(sha256: file.sha256, location: content.location(of: digest))
  }

  /// All of a file's bytes, refusing before reading anything when it is larger than `maxSize`.
  /// - Throws: ``LarderError/downloadSizeExceeded(size:maxSize:)``.
  public func data(of file: File, maxSize: Int64? = nil) throws -> Data {
    if let maxSize, file.size > maxSize {
      throw LarderError.downloadSizeExceeded(size: file.size, maxSize: maxSize)
    }
    return try collect(file, range: nil) { reader in
      if let maxSize, reader.size > maxSize {
        throw LarderError.downloadSizeExceeded(size: reader.size, maxSize: maxSize)
      }
    }
  }

  /// The bytes of `range` (clamped to the file).
  public func data(of file: File, range: Range<Int64>) throws -> Data {
    try collect(file, range: range)
  }

  /// The bytes of `range` (all when nil): one read of a local file (`check` sees it opened
  /// first), or streamed from wherever the blobs live.
  private func collect(_ file: File, range: Range<Int64>?, check: (BlobReader) throws -> Void = { _ in }) throws -> Data {
    guard let reader = try openLocal(file) else {
      var data = Data()
      try read(file, range: range) { data.append(contentsOf: $0) }
      return data
    }
    try check(reader)
    return try reader.read(range ?? 0..<reader.size)
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
