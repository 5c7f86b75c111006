internal import CLinuxIO
import Foundation

/// The Linux calls the epoll engine needs and Swift's Glibc module leaves out; the one file that
/// imports CLinuxIO.
package enum LinuxIO {
  static let readable = larder_EPOLLIN
  static let writable = larder_EPOLLOUT
  static let edgeTriggered = larder_EPOLLET
  static let peerHalfClosed = larder_EPOLLRDHUP
  static let hangUp = larder_EPOLLHUP
  static let error = larder_EPOLLERR
  /// Wakes one waiter only: each loop watches the listen socket, one accepts.
  static let exclusive = larder_EPOLLEXCLUSIVE

  static func epollCreate() -> Int32 { larder_epoll_create() }
  static func eventDescriptor() -> Int32 { larder_eventfd() }

  @discardableResult
  static func add(_ epoll: Int32, _ fd: Int32, events: UInt32, data: UInt64) -> Bool {
    larder_epoll_add(epoll, fd, events, data) == 0
  }

  static func remove(_ epoll: Int32, _ fd: Int32) { _ = larder_epoll_del(epoll, fd) }

  /// Waits up to `timeout` ms; fills `events` and `data` (same capacity) and returns how many.
  static func wait(
    _ epoll: Int32, events: UnsafeMutablePointer<UInt32>, data: UnsafeMutablePointer<UInt64>, capacity: Int,
    timeout: Int32
  ) -> Int {
    Int(larder_epoll_wait(epoll, events, data, Int32(capacity), timeout))
  }

  /// Names the calling thread as the kernel shows it (`top -H`, `perf`), cut to 15 bytes:
  /// Foundation's `Thread.name` does not reach the kernel here.
  package static func nameThisThread(_ name: String) { larder_name_thread(name) }

  /// A connection from the listen socket, non-blocking and close-on-exec; -1 with errno.
  static func accept(_ fd: Int32) -> Int32 { larder_accept(fd) }

  /// `sendfile(2)` of up to `count` bytes from `file` at `offset` (advanced) to `socket`.
  static func sendFile(_ socket: Int32, _ file: Int32, offset: inout Int64, count: Int) -> Int {
    var position = off_t(offset)
    let n = sendfile(socket, file, &position, count)
    offset = Int64(position)
    return n
  }
}
