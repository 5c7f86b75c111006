internal import CMicroHTTPD
import Foundation
import Synchronization

/// An HTTP/1.1 server on libmicrohttpd: an internal thread pool polling with `poll(2)`,
/// streaming request bodies, `sendfile` responses, keep-alive and pipelining, graceful shutdown.
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
    case running(Engine, port: Int)
    case stopping(Engine, port: Int)
    case stopped(port: Int)
  }

  /// The engine serving, with what it needs to stop.
  private enum Engine {
    case microhttpd(daemon: OpaquePointer, listenSocket: Int32, core: ServerCore)
    case epoll(EpollServer)

    var inFlight: Int {
      switch self {
      case .microhttpd(_, _, let core): core.inFlight.load(ordering: .relaxed)
      case .epoll(let server): server.inFlight.load(ordering: .relaxed)
      }
    }

    var contextCounts: (made: Int, ended: Int) {
      switch self {
      case .microhttpd(_, _, let core):
        (core.contextsMade.load(ordering: .relaxed), core.contextsEnded.load(ordering: .relaxed))
      case .epoll(let server):
        (server.contextsMade.load(ordering: .relaxed), server.contextsEnded.load(ordering: .relaxed))
      }
    }

    var openConnections: Int {
      switch self {
      case .microhttpd(_, _, let core): core.connections.count
      case .epoll(let server): server.openConnections.load(ordering: .relaxed)
      }
    }
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
    switch state.withLock({ $0 }) {
    case .running(.microhttpd(let daemon, let fd, let core), _):
      MHD_stop_daemon(daemon)
      core.reaper.stop()
      close(fd)
    case .running(.epoll(let server), _):
      _ = server.shutdown(deadline: .now)
    default:
      break
    }
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

  /// Requests begun and not yet completed.
  public var inFlightRequests: Int {
    state.withLock { s in
      switch s {
      case .running(let engine, _), .stopping(let engine, _): engine.inFlight
      case .idle, .stopped: 0
      }
    }
  }

  /// Request contexts made and ended so far (each request has one; a request libmicrohttpd
  /// drops before the handler ran is ended when its connection closes). Equal when idle.
  public var requestContextCounts: (made: Int, ended: Int) {
    state.withLock { s in
      switch s {
      case .running(let engine, _), .stopping(let engine, _): engine.contextCounts
      case .idle, .stopped: (0, 0)
      }
    }
  }

  /// Open connections libmicrohttpd has told the server about (accepted and not yet closed).
  public var openConnections: Int {
    state.withLock { s in
      switch s {
      case .running(let engine, _), .stopping(let engine, _): engine.openConnections
      case .idle, .stopped: 0
      }
    }
  }

  /// Binds the socket and starts the worker threads. Sets `SIGPIPE` to ignored for the
  /// whole process (a peer closing mid-`sendfile` must not kill the server).
  /// - Throws: `HTTPServerError` (bad host, port in use, daemon failure, already started).
  public func start() throws(HTTPServerError) {
    try state.withLock { (s: inout State) throws(HTTPServerError) in
      guard case .idle = s else { throw .alreadyStarted }
      // MHD's own threads block SIGPIPE; this covers sendfile or writes from other threads.
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
      let engine: Engine
      switch configuration.engine {
      case .epoll:
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
        engine = .epoll(server)
      case .microhttpd:
        let core = ServerCore(
          configuration: configuration, handler: handler, metrics: metrics, accessLog: log,
          maxLingering: maxLingering)
        guard let daemon = Self.startDaemon(core: core, socket: socket, connectionLimit: connectionLimit) else {
          close(socket.descriptor)
          core.reaper.stop()
          throw .daemonStartFailed
        }
        metrics.registerGauge(
          "\(metrics.namespace)_http_requests_in_flight", help: "Requests begun and not yet completed."
        ) {
          [weak core] in Double(core?.inFlight.load(ordering: .relaxed) ?? 0)
        }
        engine = .microhttpd(daemon: daemon, listenSocket: socket.descriptor, core: core)
      }
      s = .running(engine, port: socket.port)
    }
  }

  /// Stops gracefully: stop accepting (new connections are refused), let requests in flight
  /// finish until `deadline`, then close everything. Requests still running at the deadline
  /// are cut off (their body sinks get `cancel()`). Idempotent.
  /// - Returns: `true` when every request in flight finished before the deadline.
  @discardableResult
  public func shutdown(deadline: ContinuousClock.Instant) -> Bool {
    let running: Engine? = state.withLock { s in
      guard case .running(let engine, let port) = s else { return nil }
      s = .stopping(engine, port: port)
      return engine
    }
    let drained: Bool
    switch running {
    case nil: return true
    case .epoll(let server): drained = server.shutdown(deadline: deadline)
    case .microhttpd(let daemon, let fd, let core):
      drained = Self.stop(daemon: daemon, listenSocket: fd, core: core, deadline: deadline)
    }
    state.withLock { s in
      if case .stopping(_, let port) = s { s = .stopped(port: port) }
    }
    return drained
  }

  private static func stop(
    daemon: OpaquePointer, listenSocket fd: Int32, core: ServerCore, deadline: ContinuousClock.Instant
  ) -> Bool {
    core.draining.store(true, ordering: .relaxed)
    _ = MHD_quiesce_daemon(daemon)
    // Quiescing only stops polling the socket; shutting it down makes the kernel refuse
    // new connections instead of queueing them in the backlog forever.
    Glibc.shutdown(fd, Int32(SHUT_RDWR))
    var drained = true
    while core.inFlight.load(ordering: .relaxed) > 0 {
      if ContinuousClock.now >= deadline {
        drained = false
        break
      }
      usleep(5_000)
    }
    MHD_stop_daemon(daemon)
    core.accessLog.flush()
    core.reaper.stop()
    close(fd)
    return drained
  }

  @discardableResult
  public func shutdown(timeout: Duration = .seconds(10)) -> Bool {
    shutdown(deadline: .now + timeout)
  }

  private static func startDaemon(core: ServerCore, socket: ListenSocket, connectionLimit: Int)
    -> OpaquePointer?
  {
    let c = core.configuration
    let cls = Unmanaged.passUnretained(core).toOpaque()
    // poll(2), not epoll: with libmicrohttpd 0.9.75's edge-triggered epoll, a client that closed
    // mid-body was often noticed only at the idle timeout (about 1 in 3 times, measured), which
    // kept its temp file and its tus upload lock alive meanwhile. poll is level-triggered and
    // noticed every close at once in the same test; each pool thread polls few connections.
    var flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_POLL.rawValue | MHD_USE_ITC.rawValue
    flags |= MHD_USE_ERROR_LOG.rawValue
    if socket.isIPv6 { flags |= MHD_USE_IPv6.rawValue }

    let logger: MHD_LogCallback = { cls, format, arguments in
      guard let cls, let format, let arguments else { return }
      let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
      var buffer = [CChar](repeating: 0, count: 1024)
      _ = vsnprintf(&buffer, buffer.count, format, arguments)
      var message = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
      while message.hasSuffix("\n") { message.removeLast() }
      if message.hasPrefix("Application reported internal error"),
        core.intentionalCloses.load(ordering: .relaxed) > 0
      {
        core.intentionalCloses.subtract(1, ordering: .relaxed)
        core.configuration.logger.debug(message)
        return
      }
      core.configuration.logger.warning(message)
    }
    let uriLog:
      @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) ->
        UnsafeMutableRawPointer? = {
          cls, uri, connection in
          let core = Unmanaged<ServerCore>.fromOpaque(cls!).takeUnretainedValue()
          let context = core.makeContext(
            rawTarget: uri.map { String(cString: $0) } ?? "", connection: connection)
          return Unmanaged.passRetained(context).toOpaque()
        }
    let completed: MHD_RequestCompletedCallback = { cls, connection, slot, code in
      Unmanaged<ServerCore>.fromOpaque(cls!).takeUnretainedValue().completed(
        connection: connection, slot: slot, code: code)
    }
    let notify: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
      Unmanaged<ServerCore>.fromOpaque(cls!).takeUnretainedValue().connectionChanged(
        connection: connection, socketContext: socketContext, code: code)
    }
    let access: MHD_AccessHandlerCallback = { cls, connection, url, method, version, data, size, slot in
      Unmanaged<ServerCore>.fromOpaque(cls!).takeUnretainedValue().access(
        connection: connection, method: method, version: version, uploadData: data, uploadDataSize: size!,
        slot: slot!, url: url)
    }

    func item(_ option: MHD_OPTION, _ value: Int, _ pointer: UnsafeMutableRawPointer? = nil) -> MHD_OptionItem
    {
      MHD_OptionItem(option: option, value: value, ptr_value: pointer)
    }
    func address<F>(_ f: F) -> Int { Int(bitPattern: unsafeBitCast(f, to: UnsafeRawPointer.self)) }
    var items: [MHD_OptionItem] = [
      item(.EXTERNAL_LOGGER, address(logger), cls),
      item(.LISTEN_SOCKET, Int(socket.descriptor)),
      item(.URI_LOG_CALLBACK, address(uriLog), cls),
      item(.NOTIFY_COMPLETED, address(completed), cls),
      item(.NOTIFY_CONNECTION, address(notify), cls),
      item(.CONNECTION_MEMORY_LIMIT, c.connectionMemoryLimit),
      item(.CONNECTION_LIMIT, connectionLimit),
      item(.CONNECTION_TIMEOUT, c.connectionTimeout),
    ]
    if c.perIPConnectionLimit > 0 { items.append(item(.PER_IP_CONNECTION_LIMIT, c.perIPConnectionLimit)) }
    if c.threadPoolSize > 1 { items.append(item(.THREAD_POOL_SIZE, c.threadPoolSize)) }
    items.append(item(.END, 0))
    return items.withUnsafeMutableBufferPointer { buffer in
      withVaList([Int32(MHD_OPTION.ARRAY.rawValue), buffer.baseAddress!, Int32(MHD_OPTION.END.rawValue)]) {
        arguments in
        MHD_start_daemon_va(flags, 0, nil, nil, access, cls, arguments)
      }
    }
  }
}
