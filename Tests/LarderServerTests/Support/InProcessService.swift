import Foundation
import Larder
import LarderServer
import LarderTestSupport

/// A `LarderService` over a fresh temporary data directory whose app is driven in process by
/// `HTTPTestDriver`: the same routes, sinks and error mapping as the live server, no socket.
///
/// ```swift
/// try withInProcessService { s in
///   let r = try s.send(.init("POST", "/v0/b/app/o?name=a", body: [1, 2, 3]))
/// }
/// ```
final class InProcessService {
  let directory: URL
  let service: LarderService
  let driver: HTTPTestDriver

  init(
    policy: LarderService.Options.Policy = .allowAll,
    configure: (inout LarderService.Options) -> Void = { _ in }
  )
    throws
  {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-inproc-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    var options = LarderService.Options(dataDirectory: directory, policy: policy)
    configure(&options)
    do {
      service = try LarderService(options: options)
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

  /// One exchange, headers and body exactly as given (plus `Content-Length` for a body).
  func send(_ request: WireRequest) throws -> HTTPTestResponse {
    try driver.execute(request.method, request.target, headers: request.headers, body: request.body)
  }

  /// Uploads `body` as `name` and returns the metadata JSON (expects 200).
  @discardableResult
  func upload(_ name: String, _ body: [UInt8], bucket: String = "app") throws -> [String: Any] {
    let r = try send(.init("POST", "/v0/b/\(bucket)/o?name=\(enc(name))", body: body))
    guard r.status == 200, let json = r.json else {
      throw WireFailure.unexpected("upload \(name): \(r.status) \(r.text)")
    }
    return json
  }

  func rowCounts() throws -> [String: Int] {
    try service.larder.catalog.read { db in
      var out: [String: Int] = [:]
      for table in ["objects", "files", "blobs"] {
        out[table] = Int(try db.row("SELECT count(*) AS n FROM \(table)")?.int("n") ?? -1)
      }
      return out
    }
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
