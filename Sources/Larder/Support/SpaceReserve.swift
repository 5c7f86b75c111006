import Foundation
import Synchronization

/// A few MiB of disk kept in `<data>/reserve`, given back when the disk is full so that the
/// writes that free space (deletes, the collector) can still commit.
///
/// On a full disk SQLite cannot even commit a `DELETE`: the write-ahead log needs new pages
/// first. So the store holds this much space in a plain file. When a catalog write fails with
/// "database or disk is full", ``release()`` unlinks the file and the write is tried once more,
/// now with room for its log pages. The reserve comes back (``replenish()``) after a later
/// write commits, once the disk has room for it again. It is created only when the disk has
/// several times its size free: making the reserve must never be what fills a disk.
///
/// Writes that add content (``FileStore`` commits) never release it: the reserve is for
/// freeing space, not for storing one more upload.
final class SpaceReserve: Sendable {
  let path: String
  let bytes: Int64
  /// True while the file is known to be in place at full size.
  private let held: Mutex<Bool>

  /// Free space needed before the reserve is (re)created, as a multiple of its size.
  static let roomFactor: Int64 = 4

  init(directory: URL, bytes: Int64) {
    path = directory.appendingPathComponent("reserve").path
    self.bytes = bytes
    let st = POSIX.lstat(path)
    held = Mutex(st.map { ($0.st_mode & S_IFMT) == S_IFREG && Int64($0.st_blocks) * 512 >= bytes } ?? false)
  }

  /// True while the reserve file is in place.
  var isHeld: Bool { held.withLock { $0 } }

  /// Creates the reserve if it is missing and the disk has room; true if it is in place after.
  /// Cheap when it is already held (no system call).
  @discardableResult
  func replenish() -> Bool {
    guard bytes > 0 else { return false }
    return held.withLock { held in
      // Another process on the same directory (the CLI beside a server) may have released it.
      if held, POSIX.lstat(path) != nil { return true }
      held = false
      let directory = (path as NSString).deletingLastPathComponent
      guard let available = POSIX.availableBytes(directory), available >= bytes * Self.roomFactor else { return false }
      do {
        let fd = try POSIX.open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode: 0o600)
        defer { POSIX.close(fd) }
        try POSIX.allocate(fd, length: bytes, path: path)
        held = true
      } catch {
        // A reserve that could not be made whole would only hide free space: none at all.
        POSIX.unlink(path)
      }
      return held
    }
  }

  /// Gives the reserve's space back to the filesystem; true if there was a reserve to give.
  @discardableResult
  func release() -> Bool {
    held.withLock { held in
      let removed = POSIX.unlink(path)
      held = false
      return removed
    }
  }
}
