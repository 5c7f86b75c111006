import Foundation
import LarderCrypto

/// The hot state of one upload: its open partial file and, while warm, the SHA-256 of its
/// committed prefix.
///
/// Only the holder of the upload's lease (see ``UploadStore``) touches a session, so it needs
/// no lock of its own. Loading one after a restart (or after its session was dropped) truncates
/// the file to the recorded offset (bytes past it were never acknowledged) and does not re-read
/// the prefix: a cold session has no digests, and the finished file is hashed once when staged.
final class UploadSession: @unchecked Sendable {
  let path: String
  let fd: Int32
  /// The committed offset; the file holds exactly this many acknowledged bytes (and possibly an
  /// unacknowledged tail while an append is in progress).
  var offset: Int64
  /// SHA-256 of the committed prefix; nil for a session loaded with bytes already in the file.
  /// (No MD5: it is computed after the upload is committed, see ``MD5Backfill``.)
  var sha256: Digest?
  /// CRC32C of the committed prefix, kept like `sha256` (nil when cold), so that no answer reads
  /// the finished upload back for GCS's `crc32c`.
  var crc32c: RunningCRC32C?
  /// MD5 of the committed prefix while every append so far asked for it
  /// (``UploadStore/beginAppend(id:owner:offset:length:checksum:sizeLimit:checkpoints:md5:)``):
  /// a protocol whose answer reports `md5Hash` (GCS, Firebase); nil otherwise.
  var md5: Digest?
  /// Shared mode (several nodes, ``SharedUploadStorage``): what the row records, as last
  /// committed; the file then holds the bytes from `shared.base` on (what the pieces hold), not
  /// the whole upload. nil: the file is the whole upload (one node).
  var shared: SharedUploadState?

  private init(path: String, fd: Int32, offset: Int64, sha256: Digest?, shared: SharedUploadState? = nil) {
    self.path = path
    self.fd = fd
    self.offset = offset
    self.sha256 = sha256
    self.shared = shared
    // A session that starts at its first byte keeps the other checksums too.
    if offset == 0 {
      crc32c = RunningCRC32C()
      md5 = Digest(.md5)
    }
  }

  /// The upload offset of the file's first byte: 0 on one node; in shared mode what the parts
  /// held when the session was loaded or last compacted (``compact()``).
  private(set) var origin: Int64 = 0
  /// The committed bytes the file holds.
  var committedInFile: Int64 { offset - origin }

  /// Shared mode, between appends: drops from the file what the parts now hold, so it keeps
  /// only the pieces' bytes (under 5 MiB) rather than growing with the upload.
  func compact() throws {
    guard let shared, shared.base > origin else { return }
    let keep = offset - shared.base
    if keep > 0 {
      var buffer = [UInt8](repeating: 0, count: Int(keep))
      let n = try buffer.withUnsafeMutableBytes { try POSIX.readFully(fd, into: $0, at: shared.base - origin, path: path) }
      guard n == Int(keep) else { throw LarderError.posix("read", path) }
      try buffer.withUnsafeBytes { try POSIX.writeAll(fd, $0, at: 0, path: path) }
    }
    guard ftruncate(fd, off_t(keep)) == 0 else { throw LarderError.posix("truncate", path) }
    origin = shared.base
  }

  deinit { close(fd) }

  /// Opens `path` for an upload whose committed offset is `offset`.
  /// - Throws: ``UploadError/dataLost(id:)`` when the file is shorter than `offset`, or is also
  ///   linked elsewhere (it was published into `blobs/` and must never be written again);
  ///   I/O errors.
  static func load(id: String, path: String, offset: Int64) throws -> UploadSession {
    var st = stat()
    if lstat(path, &st) == 0 {
      guard st.st_nlink <= 1 else { throw UploadError.dataLost(id: id) }
      // A failed publish leaves the staged file read-only (0444).
      if st.st_mode & 0o777 != 0o600 { chmod(path, 0o600) }
    }
    let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else { throw LarderError.posix("open", path) }
    do {
      guard fstat(fd, &st) == 0 else { throw LarderError.posix("fstat", path) }
      guard st.st_nlink <= 1 else { throw UploadError.dataLost(id: id) }
      let size = Int64(st.st_size)
      guard size >= offset else { throw UploadError.dataLost(id: id) }
      if size > offset {
        guard ftruncate(fd, off_t(offset)) == 0, fsync(fd) == 0 else {
          throw LarderError.posix("truncate", path)
        }
      }
      let fresh = offset == 0
      return UploadSession(
        path: path, fd: fd, offset: offset, sha256: fresh ? Digest(.sha256) : nil)
    } catch {
      close(fd)
      throw error
    }
  }

  /// Loads an upload in shared mode on any node: the file is rebuilt from the pieces the row
  /// names (under 5 MiB and the last commit's bytes: never the whole upload) and the SHA-256
  /// resumes from the state the row saved. The file is a cache of the shared store: it is
  /// not fsync'ed, the pieces are the durable copy.
  /// - Throws: ``UploadError/dataLost(id:)`` when the row's state is unreadable, the store's errors.
  static func loadShared(
    id: String, path: String, offset: Int64, state: SharedUploadState, storage: any SharedUploadStorage
  ) throws -> UploadSession {
    guard state.base + state.piecesSize == offset, !state.assembled else { throw UploadError.dataLost(id: id) }
    let sha: Digest
    if let saved = state.sha256 {
      // The state must be of exactly the acknowledged bytes: another prefix would hash the
      // upload under a wrong address.
      guard let bytes = Data(base64Encoded: saved),
        let restored = try? Digest(restoringSHA256: [UInt8](bytes), byteCount: UInt64(offset))
      else {
        throw UploadError.dataLost(id: id)
      }
      sha = restored
    } else {
      guard offset == 0 else { throw UploadError.dataLost(id: id) }
      sha = Digest(.sha256)
    }
    // A new file (the old one may be a read-only staged copy of a publish that failed), locked
    // for the session's life before it takes the name, so `UploadStore.sweepStagingFiles` in
    // another process never removes it.
    let fresh = "\(path).\(SecureRandom.hexIdentifier(byteCount: 8))"
    let fd = open(fresh, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else { throw LarderError.posix("open", fresh) }
    POSIX.lock(fd)
    guard rename(fresh, path) == 0 else {
      unlink(fresh)
      close(fd)
      throw LarderError.posix("rename", path)
    }
    let session = UploadSession(path: path, fd: fd, offset: offset, sha256: sha, shared: state)
    session.origin = state.base
    var at: Int64 = 0
    for piece in state.pieces {
      let start = at
      do {
        try storage.readPiece(upload: id, name: piece.name) { chunk in
          try POSIX.writeAll(fd, chunk, at: at, path: path)
          at += Int64(chunk.count)
        }
      } catch LarderError.io(_, _, ENOENT) {
        throw UploadError.dataLost(id: id)
      }
      guard at - start == piece.size else { throw UploadError.dataLost(id: id) }
    }
    return session
  }

  /// Drops bytes past the committed offset (a discarded or failed append). False when that
  /// failed, or the file is linked elsewhere and must not be touched: drop the session then
  /// (the next load truncates, or refuses).
  func truncateToCommitted() -> Bool {
    var st = stat()
    guard fstat(fd, &st) == 0, st.st_nlink <= 1 else { return false }
    if Int64(st.st_size) == committedInFile { return true }
    return ftruncate(fd, off_t(committedInFile)) == 0
  }
}
