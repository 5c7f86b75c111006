import Foundation
import LarderHTTP
import LarderServer
import Synchronization

/// Starts a server on 127.0.0.1:0 for one test and always shuts it down.
func withServer<T>(
  _ configure: (inout HTTPServer.Configuration) -> Void = { _ in }, handler: any HTTPHandler,
  metrics: Metrics = Metrics(), _ body: (HTTPServer) throws -> T
) throws -> T {
  var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
  configuration.threadPoolSize = 2
  configuration.accessLog = .disabled
  configure(&configuration)
  let server = HTTPServer(configuration: configuration, handler: handler, metrics: metrics)
  try server.start()
  defer { server.shutdown(timeout: .seconds(30)) }
  return try body(server)
}

/// Records what the server did to body sinks, across server threads.
final class SinkEvents: Sendable {
  struct State {
    var received: Int64 = 0
    var maxChunk = 0
    var finishes = 0
    var cancels = 0
    var sha256 = ""
  }
  let state = Mutex(State())
  func read() -> State { state.withLock { $0 } }
}
