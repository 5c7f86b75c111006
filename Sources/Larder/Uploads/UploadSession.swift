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

  private init(path: String, fd: Int32, offset: Int64, sha256: Digest?) {
    self.path = path
    self.fd = fd
    self.offset = offset
    self.sha256 = sha256
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

  /// Drops bytes past the committed offset (a discarded or failed append). False when that
  /// failed, or the file is linked elsewhere and must not be touched: drop the session then
  /// (the next load truncates, or refuses).
  func truncateToCommitted() -> Bool {
    var st = stat()
    guard fstat(fd, &st) == 0, st.st_nlink <= 1 else { return false }
    if Int64(st.st_size) == offset { return true }
    return ftruncate(fd, off_t(offset)) == 0
  }
}
