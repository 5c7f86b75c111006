import Foundation
import Synchronization

/// An HTTP/1.1 server on Larder's own epoll engine (``EpollServer``): one event loop per thread,
/// streaming request bodies, `writev` and `sendfile` responses, keep-alive and pipelining,
/// graceful shutdown.
///
/// ```swift
/// let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0), handler: router)
/// try server.start()
/// print("listening on http://127.0.0.1:\(server.boundPort)")
/// …
/// server.shutdown(timeout: .seconds(10))
/// ```
/// It knows nothing of storage: an `HTTPHandler` decides every answer.
public final class HTTPServer: Sendable {
  private enum State {
    case idle
    case running(EpollServer, port: Int)
    case stopping(EpollServer, port: Int)
    case stopped(port: Int)
  }

  public let configuration: Configuration
  public let metrics: Metrics
  private let handler: any HTTPHandler
  private let state = Mutex(State.idle)

  /// - Parameter metrics: where request counters go; pass the instance your `/metrics` route renders.
  public init(configuration: Configuration, handler: any HTTPHandler, metrics: Metrics = Metrics()) {
    self.configuration = configuration
    self.handler = handler
    self.metrics = metrics
  }

  deinit {
    if case .running(let server, _) = state.withLock({ $0 }) { _ = server.shutdown(deadline: .now) }
  }

  /// The port the server listens on (the real one after binding port 0); 0 before `start()`.
  public var boundPort: Int {
    state.withLock { s in
      switch s {
      case .idle: 0
      case .running(_, let port), .stopping(_, let port), .stopped(let port): port
      }
    }
  }

  /// The engine while it runs or drains.
  private var engine: EpollServer? {
    state.withLock { s in
      switch s {
      case .running(let server, _), .stopping(let server, _): server
      case .idle, .stopped: nil
      }
    }
  }

  /// Requests begun and not yet completed.
  public var inFlightRequests: Int { engine?.inFlight.load(ordering: .relaxed) ?? 0 }

  /// Request contexts made and ended so far (each request has one). Equal when idle.
  public var requestContextCounts: (made: Int, ended: Int) {
    guard let engine else { return (0, 0) }
    return (engine.contextsMade.load(ordering: .relaxed), engine.contextsEnded.load(ordering: .relaxed))
  }

  /// Open connections (accepted and not yet closed; refused ones lingering excluded).
  public var openConnections: Int { engine?.openConnections.load(ordering: .relaxed) ?? 0 }

  /// Binds the socket and starts the loops and workers. Sets `SIGPIPE` to ignored for the
  /// whole process (a peer closing mid-`sendfile` must not kill the server).
  /// - Throws: `HTTPServerError` (bad host, port in use, engine failure, already started).
  public func start() throws(HTTPServerError) {
    try state.withLock { (s: inout State) throws(HTTPServerError) in
      guard case .idle = s else { throw .alreadyStarted }
      signal(SIGPIPE, SIG_IGN)
      let log = try AccessLog(configuration.accessLog)
      let socket = try ListenSocket.open(
        host: configuration.host, port: configuration.port, backlog: configuration.listenBacklog)
      let openFiles = ResourceLimits.raiseOpenFileLimit()
      let connectionLimit = ResourceLimits.connectionLimit(
        configured: configuration.connectionLimit, openFiles: openFiles)
      if connectionLimit < configuration.connectionLimit {
        configuration.logger.warning(
          "connection limit lowered to \(connectionLimit): \(openFiles) open files allowed (RLIMIT_NOFILE)")
      }
      let maxLingering = ResourceLimits.lingeringLimit(openFiles: openFiles, connectionLimit: connectionLimit)
      let server = EpollServer(
        configuration: configuration, handler: handler, metrics: metrics, accessLog: log, listen: socket,
        connectionLimit: connectionLimit, maxLingering: maxLingering)
      do throws(HTTPServerError) {
        try server.start()
      } catch {
        close(socket.descriptor)
        throw error
      }
      metrics.registerGauge(
        "\(metrics.namespace)_http_requests_in_flight", help: "Requests begun and not yet completed."
      ) {
        [weak server] in Double(server?.inFlight.load(ordering: .relaxed) ?? 0)
      }
      s = .running(server, port: socket.port)
    }
  }

  /// Stops gracefully: stop accepting (new connections are refused), let requests in flight
  /// finish until `deadline`, then close everything. Requests still running at the deadline
  /// are cut off (their body sinks get `cancel()`). Idempotent.
  /// - Returns: `true` when every request in flight finished before the deadline.
  @discardableResult
  public func shutdown(deadline: ContinuousClock.Instant) -> Bool {
    let running: EpollServer? = state.withLock { s in
      guard case .running(let server, let port) = s else { return nil }
      s = .stopping(server, port: port)
      return server
    }
    guard let running else { return true }
    let drained = running.shutdown(deadline: deadline)
    state.withLock { s in
      if case .stopping(_, let port) = s { s = .stopped(port: port) }
    }
    return drained
  }

  @discardableResult
  public func shutdown(timeout: Duration = .seconds(10)) -> Bool {
    shutdown(deadline: .now + timeout)
  }
}
