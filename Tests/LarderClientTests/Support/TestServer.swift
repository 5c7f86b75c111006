import Foundation
import LarderTestSupport
import Larder
import LarderClient
import LarderHTTP
import LarderServer
import Synchronization

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A live `LarderService` on 127.0.0.1:0 over a fresh temporary data directory, and a client for it.
final class TestServer: Sendable {
  let directory: URL
  let service: LarderService
  var baseURL: URL { URL(string: "http://127.0.0.1:\(service.port)")! }

  init(policy: LarderService.Options.Policy = .allowAll) throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-client-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    var options = LarderService.Options(dataDirectory: directory, policy: policy)
    options.http.accessLog = .disabled
    options.http.threadPoolSize = 2
    do {
      service = try LarderService(options: options.onTestStores())
      try service.start()
    } catch {
      try? FileManager.default.removeItem(at: directory)
      throw error
    }
  }

  func client(token: LarderClient.TokenProvider? = nil, retryPolicy: RetryPolicy = .default) -> LarderClient {
    LarderClient(baseURL: baseURL, bucket: "app", token: token, retryPolicy: retryPolicy)
  }

  func close() {
    _ = service.stop(timeout: .seconds(30))
    try? FileManager.default.removeItem(at: directory)
  }

  /// A file with `bytes` in this server's directory (removed with it).
  func file(_ bytes: Data, named name: String = "upload-\(UUID().uuidString).bin") throws -> URL {
    let url = directory.appendingPathComponent(name)
    try bytes.write(to: url)
    return url
  }
}

/// Runs `body` against a fresh server and client; always invalidates the client and stops the server.
func withServer<T>(
  policy: LarderService.Options.Policy = .allowAll, _ body: (TestServer, LarderClient) async throws -> T
) async throws -> T {
  let server = try TestServer(policy: policy)
  let client = server.client()
  do {
    let result = try await body(server, client)
    client.invalidate()
    server.close()
    return result
  } catch {
    client.invalidate()
    server.close()
    throw error
  }
}

/// `count` deterministic pseudo-random bytes (xorshift64*), different for each `seed`, so that
/// a misplaced or repeated chunk cannot go unnoticed.
func testBytes(_ count: Int, seed: UInt64 = 1) -> Data {
  var data = Data(count: count)
  var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
  data.withUnsafeMutableBytes { raw in
    let words = count / 8
    let p = raw.bindMemory(to: UInt64.self)
    for i in 0..<words {
      state ^= state >> 12
      state ^= state << 25
      state ^= state >> 27
      p[i] = state &* 0x2545_F491_4F6C_DD1D
    }
    for i in (words * 8)..<count { raw[i] = UInt8(truncatingIfNeeded: i &* 31 &+ Int(seed)) }
  }
  return data
}

/// Records values from `@Sendable` callbacks.
final class Recorder<T: Sendable>: Sendable {
  private let values = Mutex<[T]>([])
  func append(_ value: T) { values.withLock { $0.append(value) } }
  var all: [T] { values.withLock { $0 } }
}

/// Sends a raw request with its own URLSession (for setting up states the client would not make).
func rawRequest(_ method: String, _ url: URL, headers: [String: String], body: Data? = nil) async throws
  -> HTTPURLResponse
{
  let session = URLSession(configuration: .ephemeral)
  defer { session.invalidateAndCancel() }
  var request = URLRequest(url: url)
  request.httpMethod = method
  for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
  request.httpBody = body
  let (_, response) = try await session.data(for: request)
  return response as! HTTPURLResponse
}

/// Denies everything: what a rules file with no `allow` does.
struct DenyAllPolicy: AccessPolicy {
  func decide(_ request: AccessRequest) -> AccessDecision { .deny("test: deny all") }
}
