import Foundation
import LarderHTTP

/// Runs an ``HTTPHandler`` in process, as the server would, without a socket: `head`, then the
/// body in chunks into the sink, then `finish` (or `cancel` after a refused chunk).
///
/// Endpoint tests use it to run in milliseconds; a smaller set stays live over loopback for
/// what only a real connection shows (limits, timeouts, sendfile, connection reuse).
/// ```swift
/// let driver = HTTPTestDriver(app)
/// let r = try driver.execute("POST", "/v0/b/app/o?name=a", body: [1, 2, 3])
/// #expect(r.status == 200 && r.route == "objects.upload")
/// ```
public struct HTTPTestDriver {
  public let handler: any HTTPHandler
  /// The body arrives in chunks of at most this many bytes, like the connection memory limit.
  public var chunkSize: Int

  public init(_ handler: any HTTPHandler, chunkSize: Int = 32 * 1024) {
    self.handler = handler
    self.chunkSize = max(1, chunkSize)
  }

  /// One exchange. `Content-Length` is added for a non-empty body unless `headers` has one.
  /// A target the layer refuses (malformed) is answered by `errorResponse`, as by the server.
  public func execute(
    _ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8] = []
  ) throws -> HTTPTestResponse {
    var fields = HTTPHeaders()
    for (name, value) in headers { fields.add(name, value) }
    if !body.isEmpty && !fields.contains("Content-Length") {
      fields.add("Content-Length", String(body.count))
    }
    let request: HTTPRequest
    var response: HTTPResponse
    var route = "unmatched"
    do {
      request = try HTTPRequest(method: method, target: target, headers: fields, remoteAddress: "127.0.0.1")
    } catch {
      let fallback = try HTTPRequest(method: method, target: "/", headers: fields, remoteAddress: "127.0.0.1")
      return try Self.materialize(
        handler.errorResponse(for: error, request: fallback), request: fallback, route: route)
    }
    var decision = handler.head(request)
    while case .later(let start) = decision.action {
      decision = Self.awaitLater(start, handler: handler, request: request)
    }
    route = decision.routeLabel ?? "unmatched"
    switch decision.action {
    case .respond(let r):
      response = r
    case .receiveBody(let sink):
      response = feed(sink, body, request: request)
    case .later:
      preconditionFailure("answered above")
    }
    return try Self.materialize(response, request: request, route: route)
  }

  /// The decision a handler answering later gives its responder (the test's thread waits).
  private static func awaitLater(
    _ start: @Sendable (HTTPResponder) -> Void, handler: any HTTPHandler, request: HTTPRequest
  ) -> HTTPHeadDecision {
    let answer = LaterAnswer()
    let responder = HTTPResponder(
      deliver: { decision in
        answer.decision = decision
        answer.done.signal()
        return true
      },
      mapError: { handler.errorResponse(for: $0, request: request) })
    start(responder)
    answer.done.wait()
    return answer.decision!
  }

  /// `decision` is written once before `done` is signalled and read after it.
  private final class LaterAnswer: @unchecked Sendable {
    var decision: HTTPHeadDecision?
    let done = DispatchSemaphore(value: 0)
  }

  private func feed(_ sink: any HTTPBodySink, _ body: [UInt8], request: HTTPRequest) -> HTTPResponse {
    var offset = 0
    while offset < body.count {
      let end = min(body.count, offset + chunkSize)
      do {
        try body[offset..<end].withUnsafeBytes { try sink.receive($0) }
      } catch {
        // The sink's contract: after a refused chunk, only `cancel` follows.
        sink.cancel()
        return handler.errorResponse(for: error, request: request)
      }
      offset = end
    }
    do {
      return try sink.finish()
    } catch {
      return handler.errorResponse(for: error, request: request)
    }
  }

  static func materialize(_ response: HTTPResponse, request: HTTPRequest, route: String) throws
    -> HTTPTestResponse
  {
    // As the server sends it: the layer's own `Content-Length` (the engine's, from the body;
    // none on 1xx, 204 and 304), never the handler's, and the request id.
    var headers = response.headers
    headers.remove("Content-Length")
    if !(100..<200).contains(response.status) && response.status != 204 && response.status != 304 {
      headers.add("Content-Length", String(response.body.length))
    }
    headers.set("X-Request-Id", request.id)
    var bytes: [UInt8] = []
    switch response.body {
    case .empty, .lengthOnly: break
    case .bytes(let b): bytes = b
    case .stream(let stream):
      guard let fd = stream.take() else { break }
      defer { close(fd) }
      var chunk = [UInt8](repeating: 0, count: 64 * 1024)
      while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { break }
        bytes.append(contentsOf: chunk[0..<n])
      }
    case .file(let file):
      guard let fd = file.take() else { break }
      defer { close(fd) }
      bytes = [UInt8](repeating: 0, count: Int(file.length))
      var done = 0
      while done < bytes.count {
        let n = bytes.withUnsafeMutableBytes { buffer in
          pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(file.offset) + off_t(done))
        }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { throw CocoaError(.fileReadUnknown) }
        done += n
      }
    }
    if request.method == "HEAD" { bytes = [] }
    return HTTPTestResponse(status: response.status, headers: headers, body: bytes, route: route)
  }
}

/// What a driven exchange produced: the response as the client would read it, and its route label.
public struct HTTPTestResponse {
  public var status: Int
  public var headers: HTTPHeaders
  public var body: [UInt8]
  /// The label metrics and the access log would use.
  public var route: String

  public subscript(_ name: String) -> String? { headers[name] }
  public var text: String { String(decoding: body, as: UTF8.self) }
  public var json: [String: Any]? { try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] }
  public var error: [String: Any]? { json?["error"] as? [String: Any] }
}
