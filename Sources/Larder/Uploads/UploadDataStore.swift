import Foundation
import LarderCrypto

/// Where a resumable upload's bytes wait between appends (tusd's `DataStore`), chosen once with
/// its ``UploadLocker`` when an ``UploadStore`` is made. ``UploadStore`` and ``UploadAppend``
/// decide everything else (offsets, leases, checksums, publishing) once, over this protocol.
///
/// - ``LocalUploadData``: the staging file `uploads/<id>` *is* the upload: fsync'ed before each
///   offset commits, adopted whole as the staged blob at the end (one node).
/// - ``SharedUploadData``: the staging file is a cache; each commit first stores what arrived
///   in the shared store (S3 parts and pieces, ``SharedUploadStorage``), so any node continues
///   the upload (`SharedUploadData.swift`, ARCHITECTURE.md, "Resumable uploads across nodes").
protocol UploadDataStore: Sendable {
  /// Removes staging files that only cache bytes kept elsewhere and that no process uses: at
  /// open, and (`onlyIfDue`) from creations at most every ``UploadStore/stagingSweepInterval``.
  func sweepStagingFiles(_ uploads: UploadStore, onlyIfDue: Bool)

  /// The session an append of `upload` writes into, its lease held: `cached` while it is
  /// still current, else one loaded from what is stored.
  /// - Throws: ``UploadError/dataLost(id:)`` when the stored bytes are not the row's, I/O and
  ///   store errors.
  func session(for upload: Upload, cached: UploadSession?, _ uploads: UploadStore) throws -> UploadSession

  /// Makes the bytes [`committed.offset`, `end`) durable and commits `end` (and `length`) as the
  /// upload's offset; `sha256` is the running digest at `end`, `finishing` a partial upload's
  /// last byte. Returns the row as committed.
  func commit(
    _ session: UploadSession, committed: Upload, to end: Int64, length: Int64?, sha256: Digest?,
    finishing: Bool,
    _ uploads: UploadStore
  ) throws -> Upload

  /// The last byte of a non-partial upload arrived: its content, staged for publishing.
  func stage(_ session: UploadSession, upload: Upload, length: Int64, sha256: Digest?, _ uploads: UploadStore)
    throws
    -> StagedBlob

  /// Before a concatenation is recorded: a finished partial's bytes are still all there.
  /// - Throws: ``UploadError/dataLost(id:)``.
  func checkPartial(_ part: Upload, _ uploads: UploadStore) throws

  /// Streams exactly a finished partial's content (a concatenation's copy).
  /// - Throws: ``UploadError/dataLost(id:)`` when its bytes are gone, what `body` throws.
  func readPartial(_ part: Upload, _ uploads: UploadStore, _ body: (UnsafeRawBufferPointer) throws -> Void)
    throws

  /// Removes what is stored for an upload, beyond its staging file, once its row is gone or
  /// completed (`state`: what the row recorded). Best effort.
  func remove(_ id: String, state: SharedUploadState?, _ uploads: UploadStore)

  /// Who may hold an upload whose bytes are kept here: the locker made for `larder`'s uploads.
  func locker(for larder: Larder, lease: Duration, beforeRenewal: (@Sendable () -> Void)?) -> any UploadLocker

  /// gc's ``remove(_:state:_:)``: now, on the caller's thread, failures thrown.
  func removeStored(_ id: String, state: SharedUploadState?) throws

  /// gc's leftover pass: the uploads with something stored beyond staging files, each with the
  /// newest date among what it stored.
  func forEachStored(_ body: (_ id: String, _ newest: Date) throws -> Void) throws
}

extension UploadStore {
  /// The data store of `larder`'s uploads (the choice is made here only): shared when its blob
  /// backend can hold uploads (S3), else local. `storage` overrides the backend's.
  static func dataStore(of larder: Larder, storage: (any SharedUploadStorage)? = nil) -> any UploadDataStore {
    if let storage = storage ?? larder.sharedUploads { return SharedUploadData(storage: storage) }
    return LocalUploadData()
  }
}

/// One node's uploads: the staging file holds every acknowledged byte.
struct LocalUploadData: UploadDataStore {
  /// The files are the bytes: nothing to sweep.
  func sweepStagingFiles(_ uploads: UploadStore, onlyIfDue: Bool) {}

  /// Only this process can continue its uploads: an in-process slot.
  func locker(for larder: Larder, lease: Duration, beforeRenewal: (@Sendable () -> Void)?) -> any UploadLocker {
    ProcessUploadLocker()
  }

  func session(for upload: Upload, cached: UploadSession?, _ uploads: UploadStore) throws -> UploadSession {
    if let cached, cached.offset == upload.offset { return cached }
    try uploads.detachFromBlobs(upload.id)
    return try UploadSession.load(id: upload.id, path: uploads.path(of: upload.id), offset: upload.offset)
  }

  /// fsync'ed in the staging file, then committed.
  func commit(
    _ session: UploadSession, committed: Upload, to end: Int64, length: Int64?, sha256: Digest?,
    finishing: Bool,
    _ uploads: UploadStore
  ) throws -> Upload {
    if end > committed.offset {
      guard fsync(session.fd) == 0 else { throw LarderError.posix("fsync", session.path) }
    }
    return try uploads.commitOffset(committed, offset: end, length: length)
  }

  /// Staging fsyncs the file (and hashes it if the session was cold).
  func stage(_ session: UploadSession, upload: Upload, length: Int64, sha256: Digest?, _ uploads: UploadStore)
    throws
    -> StagedBlob
  {
    try StagedBlob.adopting(path: session.path, sha256: sha256?.finalize(), removeOnDiscard: false)
  }

  func checkPartial(_ part: Upload, _ uploads: UploadStore) throws {
    guard let st = POSIX.lstat(uploads.path(of: part.id)), Int64(st.st_size) >= part.offset else {
      throw UploadError.dataLost(id: part.id)
    }
  }

  func readPartial(_ part: Upload, _ uploads: UploadStore, _ body: (UnsafeRawBufferPointer) throws -> Void)
    throws
  {
    let reader: BlobReader
    do {
      reader = try BlobReader(path: uploads.path(of: part.id))
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

  /// Nothing beyond the staging file.
  func remove(_ id: String, state: SharedUploadState?, _ uploads: UploadStore) {}

  func removeStored(_ id: String, state: SharedUploadState?) throws {}

  func forEachStored(_ body: (_ id: String, _ newest: Date) throws -> Void) throws {}
}
