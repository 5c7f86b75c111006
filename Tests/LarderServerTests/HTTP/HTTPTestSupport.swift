import Foundation
import LarderHTTP
import Synchronization

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
