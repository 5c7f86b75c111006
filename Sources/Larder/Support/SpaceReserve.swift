import Foundation
import Synchronization

/// A few MiB of disk kept in `<data>/reserve`, given back when the disk is full so that the
/// writes that free space (deletes, the collector) can still commit.
///
/// On a full disk SQLite cannot even commit a `DELETE`: the write-ahead log needs new pages
/// first. So the store holds this much space in a plain file. When a catalog write fails with
/// "database or disk is full", ``release()`` truncates the file to zero bytes and the write is
/// tried once more, now with room for its log pages. The reserve comes back (``replenish()``)
/// after a later write commits, once the disk has room for it again. It is created only when the
/// disk has several times its size free: making the reserve must never be what fills a disk.
///
/// Once given back, the space must stay with the deletes that follow, not go to the uploads
/// still streaming: they would take it within a second, and every later delete would fail with
/// nothing left to release (and `gc` would have nothing deleted to free). So a released reserve
/// is *spent*: the file stays, empty. The empty file is the mark, on the disk, so every process
/// on the directory (the CLI's `gc` beside a server) sees it; a missing file only means the
/// reserve was never made (too little room at open), and content uses the disk unchecked.
/// While the reserve is spent, ``admitContent(adding:)`` (called before a content write creates
/// its temp file and before each block it writes: blobs, tus and resumable appends) first tries
/// to make the reserve again, and failing that admits the bytes only if they leave
/// ``contentFloorFactor`` times the reserve's size free: the reserve's worth for deletes, plus a
/// margin as large for the blocks of concurrent writers that pass the check together. Anything
/// else is ``LarderError/diskFull`` (507). Deletes, the collector and metadata-only writes are
/// never checked, and content commits never release the reserve: it is there so that deletes can
/// free space, not for storing one more upload.
final class SpaceReserve: Sendable {
  let path: String
  let bytes: Int64
  /// Serialises making and releasing the file within this process (SQLite's lock serialises the
  /// catalog writes that release it across processes).
  private let lock = Mutex(())

  /// Free space needed before the reserve is (re)created, as a multiple of its size.
  static let roomFactor: Int64 = 4
  /// Free space content must leave while the reserve is spent, as a multiple of its size.
  static let contentFloorFactor: Int64 = 2

  init(directory: URL, bytes: Int64) {
    path = directory.appendingPathComponent("reserve").path
    self.bytes = bytes
  }

  private enum State { case whole, spent, missing }

  /// What the file says now (another process may have released or remade it since).
  private func state() -> State {
    guard let st = POSIX.lstat(path), (st.st_mode & S_IFMT) == S_IFREG else { return .missing }
    return Int64(st.st_blocks) * 512 >= bytes ? .whole : .spent
  }

  /// Creates the reserve if it is missing or spent and the disk has room; true if it is in place
  /// after. One `lstat` when it is already held.
  @discardableResult
  func replenish() -> Bool {
    guard bytes > 0 else { return false }
    return lock.withLock { _ in
      let before = state()
      if before == .whole { return true }
      let directory = (path as NSString).deletingLastPathComponent
      guard let available = POSIX.availableBytes(directory), available >= bytes * Self.roomFactor else { return false }
      do {
        let fd = try POSIX.open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode: 0o600)
        defer { POSIX.close(fd) }
        try POSIX.allocate(fd, length: bytes, path: path)
        return true
      } catch {
        // A reserve that could not be made whole would only hide free space: none at all, but
        // still marked spent if it was.
        if before == .spent { Self.empty(path) } else { POSIX.unlink(path) }
        return false
      }
    }
  }

  /// Gives the reserve's space back to the filesystem, leaving the empty file that marks it
  /// spent; true if there was space to give.
  @discardableResult
  func release() -> Bool {
    lock.withLock { _ in
      guard let st = POSIX.lstat(path), (st.st_mode & S_IFMT) == S_IFREG, st.st_blocks > 0 else { return false }
      return Self.empty(path)
    }
  }

  /// Refuses content while the reserve is spent and `count` more bytes would eat into the space
  /// it left for deletes (see above); tries to make the reserve again first. One `lstat` while
  /// the reserve is whole or was never made.
  /// - Throws: ``LarderError/diskFull``.
  func admitContent(adding count: Int = 0) throws(LarderError) {
    guard bytes > 0, state() == .spent, !replenish() else { return }
    let directory = (path as NSString).deletingLastPathComponent
    // statvfs failing on our own directory: the write itself will tell.
    guard let available = POSIX.availableBytes(directory) else { return }
    guard available - Int64(count) >= bytes * Self.contentFloorFactor else { throw .diskFull }
  }

  /// Truncates the file to zero bytes (opening it needs no space on a full disk); true if done.
  @discardableResult
  private static func empty(_ path: String) -> Bool {
    guard let fd = try? POSIX.open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW) else { return false }
    POSIX.close(fd)
    return true
  }
}
