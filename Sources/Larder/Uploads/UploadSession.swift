import Foundation
import LarderCrypto

/// The hot state of one upload: its open partial file and the digests of its committed prefix.
///
/// Only the holder of the upload's lease (see ``UploadStore``) touches a session, so it needs
/// no lock of its own. Loading one after a restart truncates the file to the recorded offset
/// (bytes past it were never acknowledged) and re-hashes the prefix.
final class UploadSession: @unchecked Sendable {
  let id: String
  let path: String
  let fd: Int32
  /// The committed offset; the file holds exactly this many acknowledged bytes (and possibly an
  /// unacknowledged tail while an append is in progress).
  var offset: Int64
  var sha256: Digest
  var md5: Digest

  private init(id: String, path: String, fd: Int32, offset: Int64, sha256: Digest, md5: Digest) {
    self.id = id
    self.path = path
    self.fd = fd
    self.offset = offset
    self.sha256 = sha256
    self.md5 = md5
  }

  deinit { close(fd) }

  /// Opens `path` for an upload whose committed offset is `offset`.
  /// - Throws: ``UploadError/dataLost(id:)`` when the file is shorter than `offset`; I/O errors.
  static func load(id: String, path: String, offset: Int64) throws -> UploadSession {
    // A crash between staging (which makes the file read-only) and publishing leaves it 0444.
    chmod(path, 0o600)
    let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else { throw LarderError.posix("open", path) }
    do {
      let size = try POSIX.fileSize(fd, path: path)
      guard size >= offset else { throw UploadError.dataLost(id: id) }
      if size > offset {
        guard ftruncate(fd, off_t(offset)) == 0, fsync(fd) == 0 else {
          throw LarderError.posix("truncate", path)
        }
      }
      let sha = Digest(.sha256)
      let md = Digest(.md5)
      var buffer = [UInt8](repeating: 0, count: 1 << 20)
      var position: Int64 = 0
      while position < offset {
        let want = Int(min(Int64(buffer.count), offset - position))
        let n = try buffer.withUnsafeMutableBytes {
          try POSIX.readFully(
            fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[..<want]), at: position, path: path)
        }
        guard n == want else { throw UploadError.dataLost(id: id) }
        buffer.withUnsafeBytes {
          sha.update(UnsafeRawBufferPointer(rebasing: $0[..<n]))
          md.update(UnsafeRawBufferPointer(rebasing: $0[..<n]))
        }
        position += Int64(n)
      }
      return UploadSession(id: id, path: path, fd: fd, offset: offset, sha256: sha, md5: md)
    } catch {
      close(fd)
      throw error
    }
  }

  /// Drops bytes past the committed offset (a discarded or failed append).
  func truncateToCommitted() {
    fchmod(fd, 0o600)
    ftruncate(fd, off_t(offset))
  }
}
