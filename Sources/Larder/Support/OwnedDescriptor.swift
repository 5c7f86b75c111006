import Foundation
import Synchronization

/// A file descriptor that is closed exactly once, or handed to one new owner.
///
/// ```swift
/// let owned = OwnedDescriptor(try POSIX.open(path, O_RDONLY | O_CLOEXEC))
/// let size = try owned.use(path: path) { fd in try POSIX.fileSize(fd, path: path) }
/// let fd = owned.take()      // the new owner closes it; later uses throw EBADF
/// ```
/// Readers, staged blobs and their callers may be on different threads (a download's reader
/// goes to the HTTP layer's thread, a staged blob is discarded by whoever finishes a commit):
/// the descriptor lives in a `Mutex`, so a use, a take and a close never interleave, and a
/// second close or take finds `-1` instead of closing a number the kernel has since reused
/// for another file.
final class OwnedDescriptor: Sendable {
  private let state: Mutex<Int32>

  init(_ fd: Int32) { state = Mutex(fd) }

  deinit { close() }

  /// True until the descriptor is closed or taken.
  var isOpen: Bool { state.withLock { $0 >= 0 } }

  /// Runs `body` with the open descriptor, holding it open until `body` returns.
  /// - Throws: ``LarderError/io(operation:path:errno:)`` with `EBADF` once closed or taken,
  ///   or what `body` throws.
  func use<T: Sendable>(path: String, _ body: (Int32) throws -> T) throws -> T {
    try state.withLock { fd throws -> T in
      guard fd >= 0 else { throw LarderError.io(operation: "read", path: path, errno: EBADF) }
      return try body(fd)
    }
  }

  /// Hands the descriptor to a caller who must close it; nil if it was already closed or taken.
  func take() -> Int32? {
    state.withLock { fd in
      guard fd >= 0 else { return nil }
      defer { fd = -1 }
      return fd
    }
  }

  /// Closes the descriptor if it is still open, running `beforeClosing` first under the same
  /// lock (to remove its name while the descriptor's `flock` is still held).
  /// - Returns: true if this call closed it; false if it was closed or taken before.
  @discardableResult
  func close(beforeClosing: (Int32) -> Void = { _ in }) -> Bool {
    state.withLock { fd in
      guard fd >= 0 else { return false }
      beforeClosing(fd)
      POSIX.close(fd)
      fd = -1
      return true
    }
  }
}
