import Foundation
import Larder
import LarderHTTP
import LarderServer
import Synchronization

/// A live `LarderService` on 127.0.0.1:0 over a fresh temporary data directory: the one live
/// harness of the API, tus and security tests (the tus helpers are in `TusTestSupport.swift`,
/// the token helpers in `SecurityTestSupport.swift`). Stopped by ``close()`` or when released.
///
/// ```swift
/// try withService { s in
///   let r = try s.send(.post("/v0/b/app/o?name=a", body: [1, 2, 3]))
/// }
/// ```
final class LiveService: @unchecked Sendable {
  let directory: URL
  let service: LarderService
  var port: Int { service.port }
  var base: String { "http://127.0.0.1:\(port)" }
  var tmpDirectory: URL { directory.appendingPathComponent("tmp") }
  var blobsDirectory: URL { directory.appendingPathComponent("blobs/sha256") }

  init(policy: LarderService.Options.Policy = .allowAll, configure: (inout LarderService.Options) -> Void = { _ in }) throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-api-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    var options = LarderService.Options(dataDirectory: directory, policy: policy)
    options.http.accessLog = .disabled
    options.http.threadPoolSize = 2
    configure(&options)
    do {
      service = try LarderService(options: options)
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
  func request(
    _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
  ) throws -> WireResponse {
    var request = WireRequest(method, path, headers: headers)
    request.addLength = false
    if let body { request.headers.append(("Content-Length", String(body.count))) }
    let connection = try WireConnection(port: port)
    try connection.send(request.head(closing: true))
    if let body, !body.isEmpty { try? connection.send(body) }
    return try connection.readResponse(head: method == "HEAD")
  }

  /// Uploads `body` as `name` and returns the metadata JSON (expects 200).
  @discardableResult
  func upload(_ name: String, _ body: [UInt8], bucket: String = "app", headers: [(String, String)] = []) throws -> [String: Any] {
    let r = try send(.init("POST", "/v0/b/\(bucket)/o?name=\(enc(name))", headers: headers, body: body))
    guard r.status == 200, let json = r.json else { throw WireFailure.unexpected("upload \(name): \(r.status) \(r.text)") }
    return json
  }

  /// Files left in `tmp/` (uploads in flight or leaked).
  func tmpEntries() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: tmpDirectory.path)) ?? [] }

  /// Regular files under `blobs/sha256/`.
  func blobFiles() -> [String] {
    guard let e = FileManager.default.enumerator(atPath: blobsDirectory.path) else { return [] }
    var out: [String] = []
    while let p = e.nextObject() as? String {
      var isDir: ObjCBool = false
      if FileManager.default.fileExists(atPath: blobsDirectory.appendingPathComponent(p).path, isDirectory: &isDir), !isDir.boolValue {
        out.append(p)
      }
    }
    return out
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

/// Percent-encodes one path segment or query value (everything but unreserved characters).
func enc(_ s: String) -> String { PercentEncoding.encodeComponent(s) }
