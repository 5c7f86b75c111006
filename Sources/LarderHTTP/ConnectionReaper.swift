import Foundation
import Synchronization

/// A thread that ends connections libmicrohttpd cannot end well by itself.
///
/// - Lingering close (nginx's `lingering_close`, RFC 9112 §9.6): when a request is refused
///   from its head while the client is still sending the body, libmicrohttpd sends the answer
///   and closes the socket with the body unread, and the kernel answers the unread bytes with
///   a reset that destroys the answer in the client's receive buffer (Python's `http.client`,
///   node and tus-js-client write the whole body before reading, and saw `EPIPE`). The server
///   hands a duplicate of the descriptor here before libmicrohttpd closes its own; this thread
///   half-closes it, reads and discards until the peer closes, `budget` bytes, or
///   `lingerTime`, then closes it.
/// - `tick`, about four times a second: the server's head deadline (see `ServerCore`).
final class ConnectionReaper: Sendable {
  private struct Lingering {
    /// Descriptor numbers are reused as soon as one closes, so entries are known by this.
    let id: Int
    let descriptor: Int32
    let deadline: ContinuousClock.Instant
    var drained = 0
  }

  private struct State {
    var sockets: [Lingering] = []
    var nextID = 0
    var stopped = false
    var exited = false
  }

  /// How long a refused client gets to finish sending and read the answer.
  static let lingerTime = Duration.seconds(10)
  /// Sockets lingering at once; beyond it a socket is closed at once (as libmicrohttpd would).
  let maxLingering: Int

  private let state = Mutex(State())
  private let wakeRead: Int32
  private let wakeWrite: Int32
  private let budget: Int
  private let tick: @Sendable () -> Void

  init(budget: Int, maxLingering: Int, tick: @escaping @Sendable () -> Void) {
    self.maxLingering = maxLingering
    var pipeEnds: [Int32] = [-1, -1]
    if pipe(&pipeEnds) == 0 {
      for end in pipeEnds { _ = fcntl(end, F_SETFL, O_NONBLOCK) }
      for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    }
    wakeRead = pipeEnds[0]
    wakeWrite = pipeEnds[1]
    self.budget = budget
    self.tick = tick
    let thread = Thread { [self] in run() }
    thread.name = "larder-http-reaper"
    thread.start()
  }

  /// Takes ownership of `descriptor` (a duplicate of a connection's socket) and lingers on it.
  func linger(_ descriptor: Int32) {
    Glibc.shutdown(descriptor, Int32(SHUT_WR))
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
    let accepted = state.withLock { s in
      guard !s.stopped, s.sockets.count < maxLingering else { return false }
      s.nextID += 1
      s.sockets.append(Lingering(id: s.nextID, descriptor: descriptor, deadline: .now + Self.lingerTime))
      return true
    }
    guard accepted else {
      close(descriptor)
      return
    }
    wake()
  }

  /// Sockets lingering now.
  var lingeringCount: Int { state.withLock { $0.sockets.count } }

  /// Closes every lingering socket and ends the thread (waits up to a second for it).
  func stop() {
    state.withLock { $0.stopped = true }
    wake()
    let deadline = ContinuousClock.now + .seconds(1)
    while !state.withLock({ $0.exited }) && ContinuousClock.now < deadline { usleep(1_000) }
  }

  private func wake() {
    var one: UInt8 = 1
    _ = write(wakeWrite, &one, 1)
  }

  private func run() {
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
      let (sockets, stopped) = state.withLock { ($0.sockets, $0.stopped) }
      if stopped { break }
      var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
      fds += sockets.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
      _ = poll(&fds, nfds_t(fds.count), 250)
      if fds[0].revents != 0 { while read(wakeRead, &scratch, scratch.count) > 0 {} }
      var finished = Set<Int>()
      var drained: [Int: Int] = [:]
      let now = ContinuousClock.now
      for (i, socket) in sockets.enumerated() {
        var total = socket.drained
        var done = now >= socket.deadline
        if fds[i + 1].revents != 0 && !done {
          while true {
            let n = recv(socket.descriptor, &scratch, scratch.count, 0)
            if n > 0 {
              total += n
              if total > budget {
                done = true
                break
              }
              continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            if n < 0 && errno == EINTR { continue }
            done = true  // the peer closed (0) or reset
            break
          }
        }
        if done {
          finished.insert(socket.id)
          close(socket.descriptor)
        } else {
          drained[socket.id] = total
        }
      }
      state.withLock { s in
        s.sockets.removeAll { finished.contains($0.id) }
        for i in s.sockets.indices { s.sockets[i].drained = drained[s.sockets[i].id] ?? s.sockets[i].drained }
      }
      tick()
    }
    state.withLock { s in
      for socket in s.sockets { close(socket.descriptor) }
      s.sockets = []
      s.exited = true
    }
  }

  deinit {
    close(wakeRead)
    close(wakeWrite)
  }
}
