import Foundation
import Synchronization

/// Content of a known length produced while it is sent: a download streamed from a remote
/// store, with bounded memory per connection.
///
/// The producer runs on a thread of its own and writes into a pipe; the engine reads the
/// other end as the client takes the bytes, so at most a pipe's buffer (64 KiB) and the
/// producer's chunk are held, and a slow client slows the producer. A failure before the
/// first byte is thrown by ``init(length:producer:)`` (the handler can still answer 503); one
/// after it ends the body short, and the connection is closed (the client sees a truncated body
/// against its `Content-Length`). A client that goes away closes the pipe, and the producer's
/// next write throws, ending it.
///
/// ```swift
/// let body = try HTTPStreamBody(length: size) { write in try store.read(blob) { try write($0) } }
/// return HTTPResponse(status: 200, body: .stream(body))
/// ```
/// A worker thread waits on the pipe while the producer has nothing yet, never a loop: a remote
/// store that stalls holds that worker (for at most the store client's stall timeout).
public final class HTTPStreamBody: Sendable {
  public let length: Int64
  private let descriptor: HandedOverDescriptor

  /// Starts `producer` and returns once it has written its first bytes (or finished).
  /// - Throws: what the producer threw before writing anything, or a pipe error.
  public init(
    length: Int64,
    producer: @escaping @Sendable (_ write: (UnsafeRawBufferPointer) throws -> Void) throws -> Void
  ) throws {
    precondition(length >= 0, "negative length")
    self.length = length
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else {
      throw HTTPStreamError(message: "pipe: \(String(cString: strerror(errno)))")
    }
    // (pipe2 is not visible to Swift here; a child spawned in between would inherit the ends.)
    for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    let (readEnd, writeEnd) = (fds[0], fds[1])
    descriptor = HandedOverDescriptor(readEnd)
    // Until the first byte or the end: what happened (nil: still waiting).
    let start = Start()
    let thread = Thread {
      var wrote = false
      do {
        try producer { chunk in
          var offset = 0
          while offset < chunk.count {
            let n = Glibc.write(writeEnd, chunk.baseAddress! + offset, chunk.count - offset)
            if n < 0 {
              if errno == EINTR { continue }
              throw HTTPStreamError(message: "the client went away")
            }
            offset += n
            if !wrote {
              wrote = true
              start.settle(nil)
            }
          }
        }
        close(writeEnd)
        start.settle(nil)
      } catch {
        close(writeEnd)
        start.settle(wrote ? nil : error)
      }
    }
    thread.stackSize = 1 << 20
    thread.start()
    if let error = start.wait() {
      if let fd = take() { close(fd) }
      throw error
    }
  }

  /// Hands the pipe's read end over (to the engine, or a test driver that reads it);
  /// afterwards this object no longer closes it. Nil when it was taken already.
  public func take() -> Int32? { descriptor.take() }

  /// The producer's first outcome, waited for once.
  private final class Start: Sendable {
    private let state = Mutex<(settled: Bool, error: (any Error)?)>((false, nil))
    private let signal = DispatchSemaphore(value: 0)

    func settle(_ error: (any Error)?) {
      let first = state.withLock { s -> Bool in
        guard !s.settled else { return false }
        s = (true, error)
        return true
      }
      if first { signal.signal() }
    }

    func wait() -> (any Error)? {
      signal.wait()
      return state.withLock { $0.error }
    }
  }
}

/// A stream body could not be set up, or its client went away.
public struct HTTPStreamError: Error, Sendable, CustomStringConvertible {
  public let message: String
  public var description: String { message }
}
