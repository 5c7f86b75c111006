import Foundation
import LarderCrypto

/// Where a resumable upload's bytes wait between appends (tusd's `DataStore`), chosen once with
/// its ``UploadLocker`` when an ``UploadStore`` is made. A data store never sees the
/// ``UploadStore`` nor the `uploads` table: it opens an upload from its row, and the store
/// records what its calls return. ``UploadStore`` and ``UploadAppend`` decide everything else
/// (offsets, leases, checksums, publishing) once, over this protocol.
///
/// An append's life: ``open(_:cached:)`` (its lease held) gives the session whose file the
/// append writes; ``commit(_:id:to:sha256:finishing:)`` makes the new bytes durable and returns
/// the ``UploadDataState`` the store commits with the offset, then ``committed(_:in:id:)``; the
/// last byte is ``stage(_:upload:length:sha256:)``d for publishing (after the store recorded
/// ``assembling(_:)``); once the row is gone or completed, ``purge(_:state:background:)``
/// removes everything (the collector too, for expired rows and leftovers).
///
/// - ``LocalUploadData``: the staging file `uploads/<id>` *is* the upload: fsync'ed before each
///   offset commits, adopted whole as the staged blob at the end (one node).
/// - ``SharedUploadData``: the staging file is a cache; each commit first stores what arrived
///   in the shared store (S3 parts and pieces, ``SharedUploadStorage``), so any node continues
///   the upload (`SharedUploadData.swift`, ARCHITECTURE.md, "Resumable uploads across nodes").
protocol UploadDataStore: Sendable {
  /// Creates the staging file of a new upload (before its row).
  func create(_ id: String) throws

  /// The session an append of `upload` writes into, its lease held: `cached` while it is
  /// still current, else one loaded from what is stored. `record`: a state that opening made
  /// (a reopened assembly), to record before any byte is written.
  /// - Throws: ``UploadError/dataLost(id:)`` when the stored bytes are not the row's, I/O and
  ///   store errors.
  func open(_ upload: Upload, cached: UploadSession?) throws -> (session: UploadSession, record: UploadDataState?)

  /// Makes the bytes [`session.offset`, `end`) durable; `sha256` is the running digest at
  /// `end`, `finishing` a partial upload's last byte. Returns the state to commit with `end`.
  /// - Throws: ``UploadError/assemblyMismatch(id:)`` (its bytes are removed: the row must go),
  ///   I/O and store errors.
  func commit(_ session: UploadSession, id: String, to end: Int64, sha256: Digest?, finishing: Bool) throws
    -> UploadDataState

  /// After `state` committed: the session takes it, and what it made redundant goes.
  func committed(_ state: UploadDataState, in session: UploadSession, id: String)

  /// What `session` holds as last committed or staged (what ``purge(_:state:background:)`` removes).
  func state(of session: UploadSession) -> UploadDataState

  /// Before the last byte is staged: a state to record first (nil: none), so that a publish
  /// that fails finds the upload as staging left it.
  func assembling(_ session: UploadSession) -> UploadDataState?

  /// The last byte of a non-partial upload arrived: its content, staged for publishing.
  /// - Throws: ``UploadError/assemblyMismatch(id:)`` (as for ``commit(_:id:to:sha256:finishing:)``),
  ///   I/O and store errors.
  func stage(_ session: UploadSession, upload: Upload, length: Int64, sha256: Digest?) throws -> StagedBlob

  /// Before a concatenation is recorded: a finished partial's bytes are still all there.
  /// - Throws: ``UploadError/dataLost(id:)``.
  func checkPartial(_ part: Upload) throws

  /// Streams exactly a finished partial's content (a concatenation's copy).
  /// - Throws: ``UploadError/dataLost(id:)`` when its bytes are gone, what `body` throws.
  func readPartial(_ part: Upload, _ body: (UnsafeRawBufferPointer) throws -> Void) throws

  /// Removes everything kept for `id` (its row gone or completed; `state`: what the row
  /// recorded): the staging file now, what is stored beyond it now or, with `background`, off
  /// the caller's thread and best effort. Returns the staging bytes freed. `id` may be any
  /// plain name the data store listed (``forEachStored(_:)``).
  /// - Throws: the store's errors (not with `background`).
  @discardableResult
  func purge(_ id: String, state: UploadDataState, background: Bool) throws -> Int64

  /// The size of `id`'s staging file (0: none): what a purge would free.
  func stagedBytes(_ id: String) -> Int64

  /// Removes staging files that only cache bytes kept elsewhere and that no process uses.
  /// `exclusive` runs its body unless this process has a session of that upload, excluding its
  /// loading meanwhile.
  func sweepStagingFiles(_ exclusive: (_ id: String, _ body: () -> Void) -> Void)

  /// Everything kept, by upload id (or staging file name), with the newest date among what it
  /// stored and the staging bytes: the collector's leftover pass.
  func forEachStored(_ body: (_ id: String, _ newest: Date, _ bytes: Int64) throws -> Void) throws

  /// Waits for the background removals queued so far.
  func waitForCleanup()
}

extension UploadStore {
  /// The data store of `larder`'s uploads (the choice is made here only): shared when `storage`
  /// (by default the blob backend's, S3) can hold uploads, else local. `locker` is the one its
  /// appends hold (the collector, which appends nothing, gives ``ProcessUploadLocker``).
  static func dataStore(
    of larder: Larder, storage: (any SharedUploadStorage)?, locker: any UploadLocker
  ) -> any UploadDataStore {
    let staging = UploadStaging(directory: larder.blobs.uploadsDirectory.path)
    if let storage {
      return SharedUploadData(storage: storage, staging: staging, locker: locker, logger: larder.logger)
    }
    return LocalUploadData(staging: staging, blobs: larder.blobs, catalog: larder.catalog)
  }
}

/// The staging files `uploads/<id>` of this node's data directory. An id is never trusted as a
/// path: one that is not a plain name is never opened nor removed.
struct UploadStaging: Sendable {
  let directory: String

  func path(of id: String) -> String { "\(directory)/\(id)" }

  /// A new upload's empty file, durable before its row is.
  func create(_ id: String) throws {
    let file = path(of: id)
    let fd = open(file, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else { throw LarderError.posix("create", file) }
    close(fd)
    do {
      try POSIX.fsyncDirectory(directory)
    } catch {
      unlink(file)
      throw error
    }
  }

  /// Unlinks the staging file of `id`; returns its size, 0 when there was none.
  @discardableResult
  func remove(_ id: String) -> Int64 {
    guard GarbageCollector.isPlainName(id) else { return 0 }
    let file = path(of: id)
    let size = BlobTreeWalker.size(of: file)
    return POSIX.unlink(file) ? size : 0
  }

  func size(of id: String) -> Int64 { GarbageCollector.isPlainName(id) ? BlobTreeWalker.size(of: path(of: id)) : 0 }

  /// Every plain name in the directory, with its modification date and size.
  func forEach(_ body: (_ name: String, _ modified: Date, _ bytes: Int64) throws -> Void) throws {
    for name in POSIX.listDirectory(directory) where GarbageCollector.isPlainName(name) {
      guard let info = BlobTreeWalker.sizeAndModified(of: path(of: name)) else { continue }
      try body(name, info.modified, info.size)
    }
  }
}

/// One node's uploads: the staging file holds every acknowledged byte.
struct LocalUploadData: UploadDataStore {
  let staging: UploadStaging
  /// Where a publish that never committed may have linked a staging file (``detachFromBlobs(_:)``).
  let blobs: BlobStore
  let catalog: Catalog

  func create(_ id: String) throws { try staging.create(id) }

  func open(_ upload: Upload, cached: UploadSession?) throws -> (session: UploadSession, record: UploadDataState?) {
    if let cached, cached.offset == upload.offset { return (cached, nil) }
    try detachFromBlobs(upload.id)
    return (try UploadSession.load(id: upload.id, path: staging.path(of: upload.id), offset: upload.offset), nil)
  }

  /// fsync'ed in the staging file: nothing to record beyond the offset.
  func commit(_ session: UploadSession, id: String, to end: Int64, sha256: Digest?, finishing: Bool) throws
    -> UploadDataState
  {
    if end > session.offset {
      guard fsync(session.fd) == 0 else { throw LarderError.posix("fsync", session.path) }
    }
    return .none
  }

  func committed(_ state: UploadDataState, in session: UploadSession, id: String) {}

  func state(of session: UploadSession) -> UploadDataState { .none }

  func assembling(_ session: UploadSession) -> UploadDataState? { nil }

  /// Staging fsyncs the file (and hashes it if the session was cold).
  func stage(_ session: UploadSession, upload: Upload, length: Int64, sha256: Digest?) throws -> StagedBlob {
    try StagedBlob.adopting(path: session.path, sha256: sha256?.finalize(), removeOnDiscard: false)
  }

  func checkPartial(_ part: Upload) throws {
    guard let st = POSIX.lstat(staging.path(of: part.id)), Int64(st.st_size) >= part.offset else {
      throw UploadError.dataLost(id: part.id)
    }
  }

  func readPartial(_ part: Upload, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    let reader: BlobReader
    do {
      reader = try BlobReader(path: staging.path(of: part.id))
    } catch LarderError.io(_, _, ENOENT) {
      throw UploadError.dataLost(id: part.id)
    }
    guard reader.size >= part.offset else { throw UploadError.dataLost(id: part.id) }
    var copied: Int64 = 0
    try reader.forEachChunk { chunk in
      let take = Int(min(Int64(chunk.count), part.offset - copied))
      guard take > 0 else { return }
      try body(UnsafeRawBufferPointer(rebasing: chunk[..<take]))
      copied += Int64(take)
    }
  }

  /// The staging file is all there is.
  func purge(_ id: String, state: UploadDataState, background: Bool) throws -> Int64 {
    staging.remove(id)
  }

  func stagedBytes(_ id: String) -> Int64 { staging.size(of: id) }

  /// The files are the bytes: nothing to sweep.
  func sweepStagingFiles(_ exclusive: (_ id: String, _ body: () -> Void) -> Void) {}

  func forEachStored(_ body: (_ id: String, _ newest: Date, _ bytes: Int64) throws -> Void) throws {
    try staging.forEach(body)
  }

  func waitForCleanup() {}

  /// Undoes a publish that linked the upload's file into `blobs/` and never committed (the
  /// process died between the link and the COMMIT, or the COMMIT failed and its cleanup did
  /// not run): the upload's row still has its old offset, and its bytes are in the file. Under
  /// the write lock, a blob file that is this very file and that no row records is unlinked,
  /// so the upload is resumable again. Hashing the file to find that name costs one read of it,
  /// once, on this rare path.
  func detachFromBlobs(_ id: String) throws {
    let file = staging.path(of: id)
    guard let st = POSIX.lstat(file), st.st_nlink > 1 else { return }
    let sha = Digest(.sha256)
    do {
      try BlobReader(path: file).forEachChunk { sha.update($0) }
    } catch LarderError.io(_, _, ENOENT) {
      return
    }
    let digest = sha.finalize()
    let blob = blobs.path(for: digest)
    try catalog.write { db in
      guard try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [digest]) == nil,
        let linked = POSIX.lstat(blob), linked.st_ino == st.st_ino, linked.st_dev == st.st_dev
      else { return }
      if POSIX.unlink(blob) { try POSIX.fsyncDirectory((blob as NSString).deletingLastPathComponent) }
    }
  }
}
