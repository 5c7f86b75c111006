/// What the server asks of the application. It knows nothing of storage.
///
/// `head` runs once per request on a server thread as soon as the headers are in. It either
/// answers at once or returns a sink that receives the body in chunks of at most the
/// connection memory limit, so a many-GiB upload costs flat memory.
/// ```swift
/// struct Hello: HTTPHandler {
///   func head(_ request: HTTPRequest) -> HTTPHeadDecision { .respond(.text("hi")) }
/// }
/// ```
public protocol HTTPHandler: Sendable {
  /// Decides what to do with a request whose headers are complete. Must not block for long:
  /// it runs on one of the server's few threads. A wait that may last (a long poll, a render
  /// queued on its pool) answers ``HTTPHeadDecision/later(route:_:)`` instead of blocking.
  func head(_ request: HTTPRequest) -> HTTPHeadDecision

  /// Turns any error (an `HTTPRequestError` from parsing, or what a sink threw) into a
  /// response. The default maps `HTTPResponseError` to its response, `HTTPRequestError` to
  /// its status, and anything else to a 500 that does not leak the error's text.
  func errorResponse(for error: any Error, request: HTTPRequest) -> HTTPResponse

  /// Where `head` runs, asked on the thread that parsed the head: `.now` when the handler
  /// answered it there (it never waits: no network, no fsync, no render), `.later` when something
  /// of the handler's answers it (holding no server thread), else the work to run on a worker
  /// thread. The default sends every request to a worker.
  func start(_ request: HTTPRequest) -> HTTPHeadStart
}

/// A handler's choice of thread for one request head (``HTTPHandler/start(_:)``).
public enum HTTPHeadStart {
  /// Decided on the calling thread.
  case now(HTTPHeadDecision)
  /// May wait: the server runs this on a worker thread.
  case onWorker(@Sendable () -> HTTPHeadDecision)
  /// Answered later, holding no server thread (``HTTPHeadDecision/later(route:_:)``): `start`
  /// runs on the calling thread and must not block (it hands the responder on).
  case later(route: String?, @Sendable (HTTPResponder) -> Void)
}

extension HTTPHandler {
  public func start(_ request: HTTPRequest) -> HTTPHeadStart { .onWorker { head(request) } }

  public func errorResponse(for error: any Error, request: HTTPRequest) -> HTTPResponse {
    HTTPResponse.defaultErrorResponse(for: error)
  }
}

extension HTTPResponse {
  /// The layer's fallback mapping of errors to responses (see `HTTPHandler.errorResponse`).
  public static func defaultErrorResponse(for error: any Error) -> HTTPResponse {
    switch error {
    case let e as HTTPResponseError: e.response
    case let e as HTTPRequestError: .error(status: e.status, message: e.message)
    default: .error(status: 500, message: "internal error")
    }
  }
}

/// A handler's answer to a request head.
public struct HTTPHeadDecision {
  public enum Action {
    case respond(HTTPResponse)
    case receiveBody(any HTTPBodySink)
    /// Answered later through the ``HTTPResponder`` (see ``HTTPHeadDecision/later(route:_:)``).
    case later(@Sendable (HTTPResponder) -> Void)
  }

  public var action: Action
  /// A low-cardinality name for metrics and the access log (`objects.get`); `nil` → `unmatched`.
  public var routeLabel: String?

  public init(_ action: Action, routeLabel: String? = nil) {
    self.action = action
    self.routeLabel = routeLabel
  }

  /// Answer now. If the request carries a body it is not read, and the connection is closed after the response.
  public static func respond(_ response: HTTPResponse, route: String? = nil) -> HTTPHeadDecision {
    HTTPHeadDecision(.respond(response), routeLabel: route)
  }

  /// Stream the body into `sink`; its `finish()` produces the response.
  public static func receiveBody(_ sink: any HTTPBodySink, route: String? = nil) -> HTTPHeadDecision {
    HTTPHeadDecision(.receiveBody(sink), routeLabel: route)
  }

  /// Answer later, holding no server thread meanwhile: `start` runs at once on the thread that
  /// made this decision (a worker, or the loop for a `.now` start, where it must not block) and
  /// hands the responder to whatever will answer (a render pool's completion, a change signal).
  /// Requests pipelined behind this one wait for its answer (answers go out in order).
  public static func later(route: String? = nil, _ start: @escaping @Sendable (HTTPResponder) -> Void)
    -> HTTPHeadDecision
  {
    HTTPHeadDecision(.later(start), routeLabel: route)
  }
}

/// Receives one request body, chunk by chunk, on the connection's thread (one thread at a time).
///
/// Contract: `receive` is called zero or more times, then exactly one of
/// - `finish()` when the body is complete (also for an empty body), or
/// - `cancel()` when the body will never complete: the client went away, the connection
///   timed out, the server shut down, or `receive` threw.
/// After `receive` throws, no further `receive` or `finish` comes; `cancel()` follows.
/// If `finish()` throws, `cancel()` is *not* called: clean up before throwing.
public protocol HTTPBodySink: AnyObject {
  /// Takes the next chunk; the buffer is only valid during the call.
  /// - Throws: anything; the ``Router`` maps it (its `errorMapper`) to the response, and the
  ///   rest of the body is not read.
  func receive(_ chunk: UnsafeRawBufferPointer) throws
  /// The body is complete; returns the response.
  func finish() throws -> HTTPResponse
  /// The body will never complete: release everything (temporary files, locks).
  func cancel()
  /// Headers this sink adds to its answer whether it succeeded or failed (a created upload's
  /// `Location`, so a client can resume after an error). The ``Router`` calls it; default none.
  func decorate(_ response: inout HTTPResponse)
}

extension HTTPBodySink {
  public func decorate(_ response: inout HTTPResponse) {}
}
