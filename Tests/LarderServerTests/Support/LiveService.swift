import Foundation
import LarderTestSupport
import Larder
import LarderHTTP
import LarderServer
import Synchronization

/// A live `LarderService` on 127.0.0.1:0 over a fresh temporary data directory: the one live
/// harness of the API, tus and security tests (``withServer`` below runs a bare `HTTPServer` on
/// the same settings), for what only a real connection shows (limits,
/// timeouts, sendfile and ranges, streaming, connection reuse, metrics). Most endpoint tests run
/// in process instead (``InProcessService``); the helpers both share are on ``ServiceHarness``.
/// Stopped by ``close()`` or when released.
///
/// ```swift
/// try withService { s in
///   let r = try s.send(.post("/v0/b/app/o?name=a", body: [1, 2, 3]))
/// }
/// ```
final class LiveService: ServiceHarness, @unchecked Sendable {
  let directory: URL
  let service: LarderService
  var port: Int { service.port }
  var base: String { "http://127.0.0.1:\(port)" }

  init(policy: LarderService.Options.Policy = .allowAll, configure: (inout LarderService.Options) -> Void = { _ in }) throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-api-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    var options = LarderService.Options(dataDirectory: directory, policy: policy)
    options.http = .loopback
    configure(&options)
    do {
      service = try LarderService(options: options.onTestStores())
      try service.start()
    } catch {
      try? FileManager.default.removeItem(at: directory)
      throw error
    }
  }

  private let closed = Mutex(false)

  /// Stops the service and removes the data directory; later calls do nothing.
  func close() {
    guard closed.withLock({ c in defer { c = true }; return !c }) else { return }
    service.stop(timeout: .seconds(30))
    try? FileManager.default.removeItem(at: directory)
  }

  deinit { close() }

  /// Sends one request on a new connection (with `Connection: close`) and reads the whole answer.
  func send(_ request: WireRequest) throws -> WireResponse {
    let connection = try WireConnection(port: port)
    try connection.send(request.bytes(closing: true))
    return try connection.readResponse(head: request.method == "HEAD")
  }

  /// One exchange on its own connection (`Connection: close`), headers exactly as given;
  /// `Content-Length` is sent only with a body (even an empty one), and the body separately,
  /// since the server may answer (and close) before reading a refused one.
  func exchange(
    _ method: String, _ path: String, headers: [(String, String)], body: [UInt8]?
  ) throws -> WireResponse {
    var request = WireRequest(method, path, headers: headers)
    request.addLength = false
    if let body { request.headers.append(("Content-Length", String(body.count))) }
    let connection = try WireConnection(port: port)
    try connection.send(request.head(closing: true))
    if let body, !body.isEmpty { try? connection.send(body) }
    return try connection.readResponse(head: method == "HEAD")
  }
}

/// Runs `body` against a fresh live service and always stops it.
func withService<T>(
  policy: LarderService.Options.Policy = .allowAll, configure: (inout LarderService.Options) -> Void = { _ in },
  _ body: (LiveService) throws -> T
) throws -> T {
  let s = try LiveService(policy: policy, configure: configure)
  defer { s.close() }
  return try body(s)
}

/// Starts a bare `HTTPServer` running `handler` on 127.0.0.1:0 for one test (the HTTP layer's
/// own tests, no store) and always shuts it down.
func withServer<T>(
  _ configure: (inout HTTPServer.Configuration) -> Void = { _ in }, handler: any HTTPHandler,
  metrics: Metrics = Metrics(), _ body: (HTTPServer) throws -> T
) throws -> T {
  var configuration = HTTPServer.Configuration.loopback
  configure(&configuration)
  let server = HTTPServer(configuration: configuration, handler: handler, metrics: metrics)
  try server.start()
  defer { server.shutdown(timeout: .seconds(30)) }
  return try body(server)
}

extension HTTPServer.Configuration {
  /// What every live test runs on: 127.0.0.1, any free port, two threads, no access log.
  static var loopback: HTTPServer.Configuration {
    var c = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
    c.threadPoolSize = 2
    c.accessLog = .disabled
    return c
  }
}

/// Percent-encodes one path segment or query value (everything but unreserved characters).
func enc(_ s: String) -> String { PercentEncoding.encodeComponent(s) }
