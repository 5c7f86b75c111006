import Foundation
import Synchronization

/// One TCP connection as the server tracks it, from accept to close: libmicrohttpd's
/// per-connection `socket_context` holds it (retained), `ServerCore.connections` lists it.
///
/// It exists because libmicrohttpd forgets two things the server must not: a request whose
/// connection closes before the access handler ran (a head that overflows the pool, a
/// malformed line) never gets its completion callback, so its context is ended here on
/// close; and the descriptor, which the ``ConnectionReaper`` needs to end a head that takes
/// too long and to linger after a refusal.
final class ConnectionState {
  let descriptor: Int32
  /// The request whose context the URI-log callback made and that has not ended yet.
  /// Touched only on the connection's thread.
  var current: RequestContext?
  /// The peer may still be sending a body nobody will read: on close, drain it instead of
  /// letting the kernel answer the unread bytes with a reset (which destroys the response).
  /// Touched only on the connection's thread.
  var lingerOnClose = false
  /// What the reaper's thread may see of it.
  let watch: HeadWatch
  /// The peer's address as text, read at the first request: it cannot change on a
  /// connection, and formatting it (`inet_ntop`) for every keep-alive request showed in
  /// profiles. Touched only on the connection's thread.
  private var peer: String?

  init(descriptor: Int32) {
    self.descriptor = descriptor
    watch = HeadWatch(descriptor: descriptor)
  }

  /// The peer's address (see ``ConnectionInfo/remoteAddress(_:)``), formatted once.
  func remoteAddress(_ connection: OpaquePointer?) -> String {
    if let peer { return peer }
    let address = ConnectionInfo.remoteAddress(connection)
    peer = address
    return address
  }
}

/// The part of a connection the reaper's thread reads: its descriptor, and since when it
/// waits for a complete request head (accept, or the end of the previous request); nil while
/// a request is served.
final class HeadWatch: Sendable {
  let descriptor: Int32
  let waitingSince = Mutex<ContinuousClock.Instant?>(.now)

  init(descriptor: Int32) { self.descriptor = descriptor }
}

/// The open connections, for the head deadline (read from the reaper's thread) and the count
/// tests and `/metrics` read.
final class ConnectionRegistry: Sendable {
  private let states = Mutex<[ObjectIdentifier: HeadWatch]>([:])

  func add(_ state: ConnectionState) {
    let watch = state.watch
    states.withLock { $0[ObjectIdentifier(watch)] = watch }
  }

  /// Removes `state`; afterwards its descriptor may close, so nothing here touches it again.
  func remove(_ state: ConnectionState) {
    let key = ObjectIdentifier(state.watch)
    _ = states.withLock { $0.removeValue(forKey: key) }
  }

  var count: Int { states.withLock { $0.count } }

  /// Marks `state` as waiting for a head from now on, or (nil) as serving a request.
  func setWaiting(_ state: ConnectionState, since: ContinuousClock.Instant?) {
    state.watch.waitingSince.withLock { $0 = since }
  }

  /// Ends every connection that has waited longer than `timeout` for a complete request head.
  ///
  /// libmicrohttpd 0.9.75 has only an idle timeout, which a client sending a byte now and then
  /// never reaches. `shutdown(2)` (not `close`) is safe from this thread: the descriptor stays
  /// valid, libmicrohttpd sees end-of-stream and closes the connection on its own thread; the
  /// lock keeps the descriptor from closing meanwhile, as removal takes it first.
  /// - Returns: how many connections were ended.
  @discardableResult
  func expireHeads(olderThan timeout: Duration) -> Int {
    let now = ContinuousClock.now
    return states.withLock { states in
      var ended = 0
      for watch in states.values {
        let expired = watch.waitingSince.withLock { since in
          guard let start = since, now - start > timeout else { return false }
          since = nil
          return true
        }
        guard expired else { continue }
        Glibc.shutdown(watch.descriptor, Int32(SHUT_RDWR))
        ended += 1
      }
      return ended
    }
  }
}
