internal import CMicroHTTPD
import Foundation
import Synchronization

/// Everything the C callbacks need, passed to libmicrohttpd as an unretained pointer.
/// `HTTPServer` keeps it alive until `MHD_stop_daemon` has returned.
final class ServerCore: Sendable {
  let configuration: HTTPServer.Configuration
  let handler: any HTTPHandler
  let metrics: Metrics
  let accessLog: AccessLog
  let inFlight = Atomic<Int>(0)
  /// Request contexts made and ended: each is ended exactly once, by the completion callback or,
  /// when libmicrohttpd drops the request before the handler ran, by the connection's close.
  let contextsMade = Atomic<Int>(0)
  let contextsEnded = Atomic<Int>(0)
  let draining = Atomic<Bool>(false)
  /// `MHD_NO` returned on purpose (see `answerMidBodyAndClose`): libmicrohttpd's "internal
  /// error" message that follows is expected, so it is logged at debug level.
  let intentionalCloses = Atomic<Int>(0)
  let connections = ConnectionRegistry()
  let reaper: ConnectionReaper
  /// Bytes of a refused body read and thrown away before the error response can go out.
  /// Large enough that a client whose upload failed midway (a full disk, a rule that denies the
  /// sniffed type) usually gets the clear JSON error instead of a reset connection; beyond it the
  /// connection is closed rather than spend bandwidth on bytes that will be dropped.
  static let discardBudget = 64 << 20

  init(
    configuration: HTTPServer.Configuration, handler: any HTTPHandler, metrics: Metrics, accessLog: AccessLog,
    maxLingering: Int
  ) {
    self.configuration = configuration
    self.handler = handler
    self.metrics = metrics
    self.accessLog = accessLog
    let connections = connections
    let headTimeout = configuration.requestHeadTimeout
    reaper = ConnectionReaper(budget: Self.discardBudget, maxLingering: maxLingering) {
      if headTimeout > 0 { connections.expireHeads(olderThan: .seconds(headTimeout)) }
    }
  }

  // MARK: Access handler

  func access(
    connection: OpaquePointer?, method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?,
    uploadData: UnsafePointer<CChar>?, uploadDataSize: UnsafeMutablePointer<Int>,
    slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>, url: UnsafePointer<CChar>?
  ) -> MHD_Result {
    let context: RequestContext
    if let p = slot.pointee {
      context = Unmanaged<RequestContext>.fromOpaque(p).takeUnretainedValue()
    } else {
      // The URI-log callback always runs first; this is only a safety net.
      context = makeContext(rawTarget: url.map { String(cString: $0) } ?? "/", connection: connection)
      slot.pointee = Unmanaged.passRetained(context).toOpaque()
    }
    switch context.phase {
    case .awaitingHead:
      return begin(context, connection: connection, method: method, version: version)
    case .deferred(let response):
      if uploadDataSize.pointee > 0 {
        uploadDataSize.pointee = 0
        return .YES
      }
      if queue(response, context, connection) == .YES { return .YES }
      // After a bodiless request with `Expect: 100-continue`, libmicrohttpd 0.9.75 sends
      // `100 Continue` and calls once more with no data in a state where it refuses responses;
      // it takes the response in the final call. `MHD_NO` here would drop both this answer and
      // any pipelined request.
      if case .deferred = context.phase { return .YES }
      return .NO
    case .receiving(let sink):
      let count = uploadDataSize.pointee
      if count > 0 {
        uploadDataSize.pointee = 0
        context.bytesIn += Int64(count)
        if let limit = configuration.maxBodyBytes, context.bytesIn > limit {
          return fail(HTTPRequestError.bodyTooLarge(limit: limit), context, connection)
        }
        do {
          try sink.receive(UnsafeRawBufferPointer(start: uploadData, count: count))
        } catch {
          return fail(error, context, connection)
        }
        return .YES
      }
      context.sinkSettled = true
      let response: HTTPResponse
      do {
        response = try sink.finish()
      } catch {
        response = handler.errorResponse(for: error, request: context.request!)
      }
      return queue(response, context, connection)
    case .discarding(let response):
      let count = uploadDataSize.pointee
      if count > 0 {
        uploadDataSize.pointee = 0
        context.discarded += count
        return context.discarded > Self.discardBudget
          ? answerMidBodyAndClose(response, context, connection) : .YES
      }
      return queue(response, context, connection)
    case .responded:
      uploadDataSize.pointee = 0
      return .YES
    }
  }

  func makeContext(rawTarget: String, connection: OpaquePointer?) -> RequestContext {
    inFlight.add(1, ordering: .relaxed)
    contextsMade.add(1, ordering: .relaxed)
    let context = RequestContext(rawTarget: rawTarget)
    if let state = Self.state(of: connection) {
      // A context still current here was dropped without a completion: end it now.
      if let previous = state.current, previous !== context {
        end(previous, connection: connection, code: nil)
      }
      state.current = context
    }
    return context
  }

  /// The connection's `ConnectionState` (its `socket_context`), nil before it is set.
  static func state(of connection: OpaquePointer?) -> ConnectionState? {
    guard let info = ConnectionInfo.function(connection, .CONNECTION_INFO_SOCKET_CONTEXT),
      let p = info.pointee.socket_context
    else { return nil }
    return Unmanaged<ConnectionState>.fromOpaque(p).takeUnretainedValue()
  }

  private func begin(
    _ context: RequestContext, connection: OpaquePointer?, method: UnsafePointer<CChar>?,
    version: UnsafePointer<CChar>?
  ) -> MHD_Result {
    let methodName = method.map { String(cString: $0) } ?? ""
    context.method = methodName
    let connectionState = Self.state(of: connection)
    if let connectionState { connections.setWaiting(connectionState, since: nil) }
    let (headers, headerBytes) = Self.readHeaders(connection)
    let remote = connectionState?.remoteAddress(connection) ?? ConnectionInfo.remoteAddress(connection)
    let versionName = version.map { String(cString: $0) } ?? "HTTP/1.1"
    let hasBody: Bool = {
      if headers.contains("Transfer-Encoding") { return true }
      guard let declared = headers["Content-Length"] else { return false }
      return declared != "0"
    }()
    let request: HTTPRequest
    do {
      request = try HTTPRequest(
        method: methodName, target: context.rawTarget, headers: headers, remoteAddress: remote,
        id: headers["X-Request-Id"], version: versionName)
    } catch {
      let fallback = HTTPRequest(
        unvalidated: methodName, target: context.rawTarget, headers: headers, remoteAddress: remote,
        id: headers["X-Request-Id"], version: versionName)
      context.request = fallback
      if let framing = HTTPRequest.framingError(headers: headers, version: versionName) {
        return respondAndClose(handler.errorResponse(for: framing, request: fallback), context, connection)
      }
      return respondToHead(
        handler.errorResponse(for: error, request: fallback), hasBody: hasBody, context, connection)
    }
    context.request = request
    if let framing = HTTPRequest.framingError(headers: headers, version: versionName) {
      return respondAndClose(handler.errorResponse(for: framing, request: request), context, connection)
    }
    if headerBytes > configuration.maxHeaderBytes {
      let error = HTTPRequestError.headersTooLarge(limit: configuration.maxHeaderBytes)
      return respondToHead(
        handler.errorResponse(for: error, request: request), hasBody: hasBody, context, connection)
    }
    if let limit = configuration.maxBodyBytes, let declared = request.contentLength, declared > limit {
      let error = HTTPRequestError.bodyTooLarge(limit: limit)
      return respondToHead(
        handler.errorResponse(for: error, request: request), hasBody: hasBody, context, connection)
    }
    let decision = handler.head(request)
    context.routeLabel = decision.routeLabel
    switch decision.action {
    case .respond(let response):
      return respondToHead(response, hasBody: hasBody, context, connection)
    case .receiveBody(let sink):
      context.sink = sink
      context.phase = .receiving(sink)
      return .YES
    }
  }

  /// A response decided from the head alone. Without a body it waits for the next call
  /// (queueing in the first call would close the connection); with an unread body it goes
  /// out now, without a `100 Continue` (libmicrohttpd sends one only when the first call
  /// queued nothing), and the connection closes after it with a lingering close.
  private func respondToHead(
    _ response: HTTPResponse, hasBody: Bool, _ context: RequestContext, _ connection: OpaquePointer?
  ) -> MHD_Result {
    if hasBody { return respondAndClose(response, context, connection) }
    context.phase = .deferred(response)
    return .YES
  }

  /// Queues `response` in the first call, so libmicrohttpd never reads the body and closes the
  /// connection after the response; the close lingers (see `ConnectionReaper`) so a client
  /// still sending reads the answer instead of a reset. Never `MHD_NO` for the client's
  /// mistake: that would drop the answer and log an internal error.
  private func respondAndClose(
    _ response: HTTPResponse, _ context: RequestContext, _ connection: OpaquePointer?
  )
    -> MHD_Result
  {
    Self.state(of: connection)?.lingerOnClose = true
    let result = queue(response, context, connection)
    if result == .NO {
      configuration.logger.warning("could not queue a refusal", metadata: requestMetadata(context))
    }
    return .YES
  }

  /// The body cannot be accepted. libmicrohttpd 0.9.75 refuses a response while upload
  /// data is being processed, so the rest is drained (up to a budget) and the response
  /// goes out on the final call; a bigger remainder closes the connection.
  private func fail(_ error: any Error, _ context: RequestContext, _ connection: OpaquePointer?) -> MHD_Result
  {
    let response = handler.errorResponse(for: error, request: context.request!)
    // The sink's cleanup (temporary file, upload lock) happens before the answer can reach the
    // client, not at completion after it: a client that reads the error and looks finds nothing left.
    if let sink = context.sink, !context.sinkSettled {
      context.sinkSettled = true
      sink.cancel()
    }
    if case .bytes = response.body, queue(response, context, connection) == .YES { return .YES }
    // A known remainder beyond the budget is not worth reading: answer and close now.
    if let declared = context.request?.contentLength, declared - context.bytesIn > Int64(Self.discardBudget) {
      return answerMidBodyAndClose(response, context, connection)
    }
    context.phase = .discarding(response)
    return .YES
  }

  /// Answers in the middle of a body and closes the connection.
  ///
  /// libmicrohttpd 0.9.75 takes no response while a body is being read, and the only way to
  /// stop reading is `MHD_NO`, which closes without an answer. So the response is written
  /// here, straight onto the socket (nothing else is being written on it then: the previous
  /// response is sent and so is any `100 Continue`), and the close lingers so the client
  /// reads it. A response that does not fit the socket's buffer at once is not sent at all.
  private func answerMidBodyAndClose(
    _ response: HTTPResponse, _ context: RequestContext, _ connection: OpaquePointer?
  ) -> MHD_Result {
    if let state = Self.state(of: connection), state.descriptor >= 0, case .bytes(let body) = response.body {
      let reason =
        MHD_get_reason_phrase_for(UInt32(clamping: response.status)).map { String(cString: $0) } ?? ""
      var head = "HTTP/1.1 \(response.status) \(reason)\r\n"
      for field in response.headers
      where !HTTPHeaders.same(field.name, "Content-Length") && !HTTPHeaders.same(field.name, "Connection")
        && !(field.name + field.value).utf8.contains(where: { $0 == 13 || $0 == 10 })
      {
        head += "\(field.name): \(field.value)\r\n"
      }
      if let id = context.request?.id { head += "X-Request-Id: \(id)\r\n" }
      head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
      let bytes = Array(head.utf8) + body
      let sent = bytes.withUnsafeBytes {
        send(state.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
      }
      if sent == bytes.count {
        context.status = response.status
        context.bytesOut = Int64(body.count)
        context.phase = .responded
        state.lingerOnClose = true
      }
    }
    intentionalCloses.add(1, ordering: .relaxed)
    return .NO
  }

  private func queue(_ response: HTTPResponse, _ context: RequestContext, _ connection: OpaquePointer?)
    -> MHD_Result
  {
    let isHead = context.method == "HEAD"
    guard let mhd = Self.makeResponse(response.body) else {
      context.phase = .responded
      configuration.logger.error(
        "could not create a response (out of memory?)", metadata: requestMetadata(context))
      return .NO
    }
    defer { MHD_destroy_response(mhd) }
    for field in response.headers where !HTTPHeaders.same(field.name, "Content-Length") {
      // `withCString` lends Swift's own NUL-terminated storage; passing the Strings directly
      // made a C copy of each (an allocation per header per response, seen in profiles).
      let added = field.name.withCString { name in
        field.value.withCString { value in MHD_add_response_header(mhd, name, value) }
      }
      if added != .YES {
        configuration.logger.warning(
          "dropped invalid response header \(field.name.debugDescription)", metadata: requestMetadata(context)
        )
      }
    }
    if let id = context.request?.id { id.withCString { _ = MHD_add_response_header(mhd, "X-Request-Id", $0) } }
    if draining.load(ordering: .relaxed) { MHD_add_response_header(mhd, "Connection", "close") }
    let result = MHD_queue_response(connection, UInt32(clamping: response.status), mhd)
    if result == .YES {
      context.phase = .responded
      context.status = response.status
      context.bytesOut = isHead ? 0 : response.body.length
    }
    return result
  }

  private func requestMetadata(_ context: RequestContext) -> [String: String] {
    context.request.map { ["request_id": $0.id] } ?? [:]
  }

  static func makeResponse(_ body: HTTPResponse.Body) -> OpaquePointer? {
    switch body {
    case .empty:
      return MHD_create_response_from_buffer(0, nil, .RESPMEM_PERSISTENT)
    case .bytes(let bytes):
      return bytes.withUnsafeBytes { buffer in
        guard let base = buffer.baseAddress, buffer.count > 0 else {
          return MHD_create_response_from_buffer(0, nil, .RESPMEM_PERSISTENT)
        }
        return MHD_create_response_from_buffer(
          buffer.count, UnsafeMutableRawPointer(mutating: base), .RESPMEM_MUST_COPY)
      }
    case .file(let file):
      guard let fd = file.take() else { return nil }
      guard let r = MHD_create_response_from_fd_at_offset64(UInt64(file.length), fd, UInt64(file.offset))
      else {
        close(fd)
        return nil
      }
      return r
    case .stream(let stream):
      guard let fd = stream.take() else { return nil }
      // The pipe's read end rides in the context pointer; the free callback closes it.
      let context = UnsafeMutableRawPointer(bitPattern: Int(fd) + 1)
      guard
        let r = MHD_create_response_from_callback(
          UInt64(stream.length), 64 * 1024,
          { cls, _, buffer, max in
            let fd = Int32(Int(bitPattern: cls) - 1)
            while true {
              let n = read(fd, buffer, max)
              if n > 0 { return n }
              if n < 0 && errno == EINTR { continue }
              // The producer ended short (its store failed mid-way) or the pipe broke:
              // MHD_CONTENT_READER_END_WITH_ERROR closes the connection.
              return -2
            }
          }, context, { cls in close(Int32(Int(bitPattern: cls) - 1)) })
      else {
        close(fd)
        return nil
      }
      return r
    case .lengthOnly(let length):
      // The reader answers MHD_CONTENT_READER_END_WITH_ERROR (-2): for HEAD it is never
      // called; anything else gets its connection closed after the headers.
      return MHD_create_response_from_callback(UInt64(max(0, length)), 4096, { _, _, _, _ in -2 }, nil, nil)
    }
  }

  static func readHeaders(_ connection: OpaquePointer?) -> (HTTPHeaders, Int) {
    final class Collector {
      var headers = HTTPHeaders()
      var bytes = 0
    }
    let collector = Collector()
    withExtendedLifetime(collector) {
      _ = MHD_get_connection_values(
        connection, .HEADER_KIND,
        { cls, _, key, value in
          let c = Unmanaged<Collector>.fromOpaque(cls!).takeUnretainedValue()
          let name = key.map { String(cString: $0) } ?? ""
          // libmicrohttpd drops leading whitespace; RFC 9110 §5.5 says trailing goes too, here,
          // once, so no header parser has to remember it.
          var text = value.map { String(cString: $0) } ?? ""
          while let last = text.utf8.last, last == 0x20 || last == 0x09 { text.removeLast() }
          c.bytes += name.utf8.count + text.utf8.count + 4
          c.headers.add(name, text)
          return .YES
        }, Unmanaged.passUnretained(collector).toOpaque())
    }
    return (collector.headers, collector.bytes)
  }

  // MARK: Completion

  func completed(
    connection: OpaquePointer?, slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    code: MHD_RequestTerminationCode
  ) {
    guard let slot, let p = slot.pointee else { return }
    slot.pointee = nil
    let context = Unmanaged<RequestContext>.fromOpaque(p).takeRetainedValue()
    end(context, connection: connection, code: code)
    if let state = Self.state(of: connection) {
      if state.current === context { state.current = nil }
      connections.setWaiting(state, since: .now)
    }
  }

  /// libmicrohttpd's connection notifications: the state is made on accept and, on close,
  /// ends a request the library dropped without a completion, and lingers when asked.
  func connectionChanged(
    connection: OpaquePointer?, socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    code: MHD_ConnectionNotificationCode
  ) {
    guard let socketContext else { return }
    switch code {
    case .CONNECTION_NOTIFY_STARTED:
      let fd = ConnectionInfo.function(connection, .CONNECTION_INFO_CONNECTION_FD)?.pointee.connect_fd ?? -1
      let state = ConnectionState(descriptor: fd)
      connections.add(state)
      socketContext.pointee = Unmanaged.passRetained(state).toOpaque()
    case .CONNECTION_NOTIFY_CLOSED:
      guard let p = socketContext.pointee else { return }
      socketContext.pointee = nil
      let state = Unmanaged<ConnectionState>.fromOpaque(p).takeRetainedValue()
      connections.remove(state)
      if let context = state.current {
        // Made by the URI-log callback, never completed: its retain in `con_cls` is ours to drop.
        state.current = nil
        end(context, connection: connection, code: nil)
        Unmanaged.passUnretained(context).release()
      }
      if state.lingerOnClose && state.descriptor >= 0 {
        let copy = fcntl(state.descriptor, F_DUPFD_CLOEXEC, 0)
        if copy >= 0 { reaper.linger(copy) }
      }
    default:
      break
    }
  }

  /// Records a request's end exactly once: metrics, access log, the in-flight count, the sink.
  /// `code` nil: libmicrohttpd dropped the request without completing it.
  private func end(_ context: RequestContext, connection: OpaquePointer?, code: MHD_RequestTerminationCode?) {
    guard !context.ended else { return }
    context.ended = true
    contextsEnded.add(1, ordering: .relaxed)
    defer { inFlight.subtract(1, ordering: .relaxed) }
    if let sink = context.sink, !context.sinkSettled {
      context.sinkSettled = true
      sink.cancel()
    }
    if context.status == 0 { context.status = ConnectionInfo.queuedStatus(connection) ?? 0 }
    let outcome: String
    switch code {
    case nil: outcome = "dropped"
    case .REQUEST_TERMINATED_COMPLETED_OK: outcome = "ok"
    case .REQUEST_TERMINATED_TIMEOUT_REACHED: outcome = "timeout"
    case .REQUEST_TERMINATED_DAEMON_SHUTDOWN: outcome = "shutdown"
    case .REQUEST_TERMINATED_READ_ERROR: outcome = "read_error"
    case .REQUEST_TERMINATED_CLIENT_ABORT: outcome = "client_abort"
    default: outcome = "error"
    }
    context.record(
      outcome: outcome, metrics: metrics, accessLog: accessLog,
      remote: { ConnectionInfo.remoteAddress(connection) })
  }
}
