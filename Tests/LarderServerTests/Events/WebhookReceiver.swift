import Foundation
import LarderHTTP
import Synchronization

/// A webhook receiver on 127.0.0.1:0 (a real `HTTPServer`) that records every request it gets
/// and answers what `answer` says for the n-th one (0-based): a status, after a delay.
final class WebhookReceiver: Sendable {
  struct Received: Sendable {
    var headers: [String: String]
    var body: [UInt8]
    var status: Int
    var json: [String: Any]? { try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] }
    subscript(_ name: String) -> String? { headers[name.lowercased()] }
  }

  private let server: HTTPServer
  private let log = LogBox()
  var url: String { "http://127.0.0.1:\(server.boundPort)/hook" }

  init(answer: @escaping @Sendable (Int) -> (status: Int, delay: Duration) = { _ in (204, .zero) }) throws {
    var router = Router()
    let log = log
    router.add("POST", "/hook", route: "hook") { request, _ in
      var headers: [String: String] = [:]
      for field in request.headers { headers[field.name.lowercased()] = field.value }
      return .receiveBody(
        Collector { body in
          let n = log.withLock { $0.count }
          let (status, delay) = answer(n)
          log.withLock { $0.append(Received(headers: headers, body: body, status: status)) }
          if delay > .zero { Thread.sleep(forTimeInterval: Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18) }
          var response = HTTPResponse(status: status)
          if status == 302 { response.headers.set("Location", "/elsewhere") }
          return response
        })
    }
    router.add("POST", "/elsewhere", route: "elsewhere") { _, _ in
      log.withLock { $0.append(Received(headers: ["redirected": "yes"], body: [], status: 200)) }
      return .respond(HTTPResponse(status: 200))
    }
    var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
    configuration.threadPoolSize = 4
    configuration.accessLog = .disabled
    server = HTTPServer(configuration: configuration, handler: router, metrics: Metrics())
    try server.start()
  }

  var received: [Received] { log.withLock { $0 } }

  final class LogBox: Sendable {
    private let entries = Mutex<[Received]>([])
    func withLock<T>(_ body: (inout [Received]) -> T) -> T { entries.withLock { body(&$0) } }
  }
  /// The requests answered with a 2xx.
  var acknowledged: [Received] { received.filter { (200..<300).contains($0.status) } }

  /// Waits until `condition` holds on what was received (up to `timeout`).
  @discardableResult
  func wait(timeout: Duration = .seconds(20), until condition: ([Received]) -> Bool) -> [Received] {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
      let now = received
      if condition(now) { return now }
      Thread.sleep(forTimeInterval: 0.01)
    }
    return received
  }

  func close() { _ = server.shutdown(timeout: .seconds(5)) }
  deinit { close() }
}

private final class Collector: HTTPBodySink {
  var buffer: [UInt8] = []
  let complete: ([UInt8]) -> HTTPResponse
  init(complete: @escaping ([UInt8]) -> HTTPResponse) { self.complete = complete }
  func receive(_ chunk: UnsafeRawBufferPointer) throws { buffer.append(contentsOf: chunk) }
  func finish() throws -> HTTPResponse { complete(buffer) }
  func cancel() {}
}
