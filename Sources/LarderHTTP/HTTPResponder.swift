import Synchronization

/// The one-shot completion of a request a handler answers later (``HTTPHeadDecision/later(route:_:)``):
/// a long poll, a render on its own pool. No server thread waits meanwhile.
///
/// ```swift
/// .later(route: "feed") { responder in
///   waiters.add { page in responder.respond(.json(page)) }
///   responder.onStopWaiting { waiters.removeAll(for: responder) }
/// }
/// ```
/// Contract: call ``respond(_:)-(HTTPHeadDecision)`` (or ``fail(_:)``) exactly once, from any
/// thread, at any time; a second call is ignored. The server gives no deadline of its own: the
/// handler bounds its wait (the idle and head timeouts do not apply while it waits).
/// ``onStopWaiting(_:)``'s closures run once when the server no longer wants to wait: the client
/// went away or the connection was closed (an answer is then ignored), or the server began
/// draining (an answer given promptly is still sent, with `Connection: close`).
public final class HTTPResponder: Sendable {
  private struct State {
    var answered = false
    var stopped = false
    /// The answer can no longer reach anyone: the connection closed.
    var closed = false
    var onStop: [@Sendable () -> Void] = []
  }

  private let state = Mutex(State())
  private let deliver: @Sendable (HTTPHeadDecision) -> Bool
  private let mapError: @Sendable (any Error) -> HTTPResponse
  /// The responder this one's answers go to (``mapped(_:mapError:)``).
  private let parent: HTTPResponder?

  /// `deliver` takes the answer (once) and says whether it can still be sent; `mapError` turns
  /// a ``fail(_:)`` into a response.
  public convenience init(
    deliver: @escaping @Sendable (HTTPHeadDecision) -> Bool,
    mapError: @escaping @Sendable (any Error) -> HTTPResponse = { HTTPResponse.defaultErrorResponse(for: $0) }
  ) {
    self.init(deliver: deliver, mapError: mapError, parent: nil)
  }

  private init(
    deliver: @escaping @Sendable (HTTPHeadDecision) -> Bool, mapError: @escaping @Sendable (any Error) -> HTTPResponse,
    parent: HTTPResponder?
  ) {
    self.deliver = deliver
    self.mapError = mapError
    self.parent = parent
  }

  /// Answers the request; false (and nothing happens) when it was answered already or its
  /// connection is gone.
  @discardableResult
  public func respond(_ decision: HTTPHeadDecision) -> Bool {
    let first = state.withLock { s -> Bool in
      guard !s.answered, !s.closed else { return false }
      s.answered = true
      // Never needed now; they often hold this responder (a cycle otherwise).
      s.onStop = []
      return true
    }
    return first && deliver(decision)
  }

  @discardableResult
  public func respond(_ response: HTTPResponse) -> Bool { respond(.respond(response)) }

  /// Answers with `error` as the handler maps errors.
  @discardableResult
  public func fail(_ error: any Error) -> Bool { respond(.respond(mapError(error))) }

  /// Answers with what `make` returns, or its error as the handler maps errors.
  @discardableResult
  public func respond(_ make: () throws -> HTTPResponse) -> Bool {
    do { return respond(.respond(try make())) } catch { return fail(error) }
  }

  /// True once answered or once the connection is gone: nothing more to do.
  public var isDone: Bool { state.withLock { $0.answered || $0.closed } || parent?.isDone == true }

  /// Runs `body` once when the server stops waiting (see the type's contract); at once if it
  /// has, never once answered.
  public func onStopWaiting(_ body: @escaping @Sendable () -> Void) {
    let now = state.withLock { s -> Bool in
      if s.answered { return false }
      if s.stopped { return true }
      s.onStop.append(body)
      return false
    }
    if now { body() }
  }

  /// The server stops waiting; `closed`: no answer can be sent any more.
  func stopWaiting(closed: Bool) {
    let run = state.withLock { s -> [@Sendable () -> Void] in
      if closed { s.closed = true }
      guard !s.stopped, !s.answered else { return [] }
      s.stopped = true
      defer { s.onStop = [] }
      return s.onStop
    }
    for body in run { body() }
  }

  /// A responder whose answers go through `transform` to this one, and that stops waiting when
  /// this one does (a router decorating its routes' answers).
  public func mapped(
    _ transform: @escaping @Sendable (HTTPHeadDecision) -> HTTPHeadDecision,
    mapError: @escaping @Sendable (any Error) -> HTTPResponse
  ) -> HTTPResponder {
    let outer = HTTPResponder(deliver: { [self] in self.respond(transform($0)) }, mapError: mapError, parent: self)
    onStopWaiting { [weak outer] in outer?.stopWaiting(closed: false) }
    return outer
  }
}
