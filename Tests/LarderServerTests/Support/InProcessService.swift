import Foundation
import Larder
import LarderServer
import LarderTestSupport

/// A `LarderService` over a fresh temporary data directory whose app is driven in process by
/// `HTTPTestDriver`: the same routes, sinks and error mapping as the live server, no socket,
/// so a test runs in milliseconds. What only the wire shows (the server's limits, timeouts,
/// sendfile, streaming, connection reuse, metrics) stays on ``LiveService``.
///
/// ```swift
/// try withInProcessService { s in
///   let r = try s.send(.init("POST", "/v0/b/app/o?name=a", body: [1, 2, 3]))
///   #expect(r.route == "objects.upload")
/// }
/// ```
final class InProcessService: ServiceHarness {
  let directory: URL
  let service: LarderService
  let driver: HTTPTestDriver

  /// `store` opens the service's store in its data directory (nil: the service opens it);
  /// `uploads`: the service's upload store, made on that store and the options (by default the
  /// service makes its own).
  init(
    policy: LarderService.Options.Policy = .allowAll,
    configure: (inout LarderService.Options) -> Void = { _ in },
    store: ((URL) throws -> Larder)? = nil,
    uploads: ((Larder, LarderService.Options) -> UploadStore)? = nil
  )
    throws
  {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-inproc-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    var options = LarderService.Options(dataDirectory: directory, policy: policy)
    configure(&options)
    options = options.onTestStores()
    do {
      let larder = try store?(directory) ?? (uploads == nil ? nil : try TestStore.open(at: directory))
      service = try LarderService(
        options: options, larder: larder, uploads: larder.flatMap { l in uploads.map { $0(l, options) } })
    } catch {
      try? FileManager.default.removeItem(at: directory)
      throw error
    }
    driver = HTTPTestDriver(service.app)
  }

  func close() {
    service.stop(timeout: .seconds(1))
    try? FileManager.default.removeItem(at: directory)
  }

  /// One exchange with the headers ``WireRequest`` would put on the wire (`Host`, and
  /// `Content-Length` for a body or a POST, PATCH or PUT).
  func send(_ request: WireRequest) throws -> WireResponse {
    guard request.addLength || request.body.isEmpty else {
      throw WireFailure.unexpected("a body without Content-Length is a wire test: use LiveService")
    }
    var headers = [("Host", "127.0.0.1")] + request.headers
    if request.addLength && (!request.body.isEmpty || ["POST", "PATCH", "PUT"].contains(request.method)) {
      headers.append(("Content-Length", String(request.body.count)))
    }
    return try drive(request.method, request.target, headers: headers, body: request.body)
  }

  /// One exchange, headers exactly as given (plus `Host`); `Content-Length` only with a body.
  func exchange(_ method: String, _ path: String, headers: [(String, String)], body: [UInt8]?) throws
    -> WireResponse
  {
    var fields = [("Host", "127.0.0.1")] + headers
    if let body { fields.append(("Content-Length", String(body.count))) }
    return try drive(method, path, headers: fields, body: body ?? [])
  }

  private func drive(_ method: String, _ target: String, headers: [(String, String)], body: [UInt8]) throws
    -> WireResponse
  {
    let r = try driver.execute(method, target, headers: headers, body: body)
    return WireResponse(status: r.status, headers: r.headers, body: r.body, route: r.route)
  }
}

/// Runs `body` against a fresh in-process service and always cleans up.
func withInProcessService<T>(
  policy: LarderService.Options.Policy = .allowAll,
  configure: (inout LarderService.Options) -> Void = { _ in },
  _ body: (InProcessService) throws -> T
) throws -> T {
  let s = try InProcessService(policy: policy, configure: configure)
  defer { s.close() }
  return try body(s)
}
