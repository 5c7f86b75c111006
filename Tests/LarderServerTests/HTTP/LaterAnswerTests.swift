import Foundation
import LarderHTTP
import Synchronization
import Testing

/// Responders a test's handler handed out, by the path's `{n}`, and what their wait saw.
private final class Waiting: Sendable {
  struct State {
    var responders: [String: HTTPResponder] = [:]
    var stopped: [String] = []
    /// Where each `.later` start ran (`/proc/thread-self/comm`).
    var startThreads: [String: String] = [:]
    /// The order handlers ran in.
    var ran: [String] = []
  }
  let state = Mutex(State())
  var count: Int { state.withLock { $0.responders.count } }
  func responder(_ n: String) -> HTTPResponder? { state.withLock { $0.responders[n] } }
  var stopped: [String] { state.withLock { $0.stopped } }
}

private func threadName() -> String {
  ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "")
    .trimmingCharacters(in: .whitespacesAndNewlines)
}

private struct Teapot: Error {}

/// `/later/{n}` answers later (on a worker's decision), `/loop-later/{n}` too from the loop (an
/// inline route), `/plain/{n}` at once on a worker. `hurry`: a responder asked to stop waiting
/// answers `stopped n` (as the events feed answers its empty page when the server drains).
private func laterRouter(_ waiting: Waiting, hurry: Bool = false) -> Router {
  var router = Router()
  router.errorMapper = { error, _ in
    error is Teapot ? .error(status: 418, message: "teapot") : HTTPResponse.defaultErrorResponse(for: error)
  }
  for prefix in ["later", "loop-later"] {
    router.add(
      "GET", "/\(prefix)/{n}", route: prefix, decorate: { r, _ in r.headers.set("X-Route", prefix) }
    ) { _, params in
      let n = try params.decoded("n")
      waiting.state.withLock { $0.ran.append(n) }
      return .later { responder in
        waiting.state.withLock {
          $0.responders[n] = responder
          $0.startThreads[n] = threadName()
        }
        responder.onStopWaiting {
          waiting.state.withLock { $0.stopped.append(n) }
          if hurry { responder.respond(.text("stopped \(n)")) }
        }
      }
    }
  }
  router.add("GET", "/plain/{n}", route: "plain") { _, params in
    let n = try params.decoded("n")
    waiting.state.withLock { $0.ran.append(n) }
    return .respond(.text("plain \(n)"))
  }
  router.runInline(["loop-later"]) { _ in true }
  return router
}

/// A handler may answer later, from any thread, holding no server thread meanwhile
/// (``HTTPHeadDecision/later(route:_:)``); the edge cases of a pending answer.
@Suite struct LaterAnswerTests {
  /// 100 requests waiting at once (the test server has 2 loops and 8 workers) hold no thread:
  /// a plain request is answered meanwhile, and each waiting one gets its own answer, given
  /// from a thread that is not the server's, in any order.
  @Test func waitingRequestsHoldNoThreadAndAreAnsweredFromAnyThread() throws {
    let waiting = Waiting()
    // All from 127.0.0.1: past the per-address limit's default of 64.
    try withServer({ $0.perIPConnectionLimit = 0 }, handler: laterRouter(waiting)) { server in
      let clients = try (0..<100).map { i -> WireConnection in
        let c = try WireConnection(port: server.boundPort)
        try c.send("GET /\(i % 2 == 0 ? "later" : "loop-later")/\(i) HTTP/1.1\r\nHost: x\r\n\r\n")
        return c
      }
      #expect(pollUntil { waiting.count == 100 })
      let plain = try WireConnection(port: server.boundPort)
      try plain.send("GET /plain/p HTTP/1.1\r\nHost: x\r\n\r\n")
      let r = try plain.readResponse()
      #expect(r.status == 200 && r.text == "plain p")
      // The plain request ends just after its answer is written.
      #expect(pollUntil { server.inFlightRequests == 100 })

      let answerer = Thread {
        for i in (0..<100).reversed() { waiting.responder("\(i)")?.respond(.text("answer \(i)")) }
      }
      answerer.start()
      for (i, c) in clients.enumerated() {
        let r = try c.readResponse()
        #expect(r.status == 200 && r.text == "answer \(i)")
        #expect(r["X-Route"] == (i % 2 == 0 ? "later" : "loop-later"))
        // Kept alive: the connection serves the next request.
        try c.send("GET /plain/\(i) HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try c.readResponse().text == "plain \(i)")
      }
      let threads = waiting.state.withLock { $0.startThreads }
      #expect(threads["0"]?.hasPrefix("http-worker-") == true, "\(threads["0"] ?? "")")
      #expect(threads["1"]?.hasPrefix("http-loop-") == true, "\(threads["1"] ?? "")")
      #expect(pollUntil { server.inFlightRequests == 0 })
      let counts = server.requestContextCounts
      #expect(counts.made == counts.ended && counts.made == 201)
    }
  }

  /// Requests pipelined behind a waiting one are not started before its answer, and the
  /// answers go out in order.
  @Test func pipelinedRequestsBehindAWaitingOneStayInOrder() throws {
    let waiting = Waiting()
    try withServer(handler: laterRouter(waiting)) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send(
        "GET /later/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /plain/2 HTTP/1.1\r\nHost: x\r\n\r\n"
          + "GET /loop-later/3 HTTP/1.1\r\nHost: x\r\n\r\nGET /plain/4 HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(pollUntil { waiting.count == 1 })
      usleep(200_000)
      #expect(waiting.state.withLock { $0.ran } == ["1"])
      waiting.responder("1")?.respond(.text("one"))
      #expect(pollUntil { waiting.count == 2 })
      #expect(waiting.state.withLock { $0.ran } == ["1", "2", "3"])
      waiting.responder("3")?.respond(.text("three"))
      #expect(try c.readResponse().text == "one")
      #expect(try c.readResponse().text == "plain 2")
      #expect(try c.readResponse().text == "three")
      #expect(try c.readResponse().text == "plain 4")
    }
  }

  /// The first answer wins; a second is refused and sends nothing (the connection's next
  /// answer is its next request's). A failure is mapped and decorated as the route's errors are.
  @Test func aSecondAnswerIsIgnoredAndAFailureIsMappedAsTheRoutesErrors() throws {
    let waiting = Waiting()
    try withServer(handler: laterRouter(waiting)) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("GET /later/1 HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(pollUntil { waiting.count == 1 })
      let responder = try #require(waiting.responder("1"))
      #expect(responder.respond(.text("first")))
      #expect(!responder.respond(.text("second")))
      #expect(!responder.fail(Teapot()))
      #expect(try c.readResponse().text == "first")
      try c.send("GET /later/2 HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(pollUntil { waiting.count == 2 })
      #expect(try #require(waiting.responder("2")).fail(Teapot()))
      let r = try c.readResponse()
      #expect(r.status == 418 && r.error?["message"] as? String == "teapot" && r["X-Route"] == "later")
      try c.send("GET /plain/3 HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(try c.readResponse().text == "plain 3")
    }
  }

  /// A client that goes away ends the wait: the handler hears it, the request ends (counted as
  /// the client's abort), the connection is released, and an answer after it is a no-op.
  @Test func aClientThatLeavesEndsTheWaitAndALaterAnswerIsANoOp() throws {
    let waiting = Waiting()
    try withServer(handler: laterRouter(waiting)) { server in
      for (i, how) in ["close", "reset"].enumerated() {
        let c = try WireConnection(port: server.boundPort)
        try c.send("GET /later/\(i) HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(pollUntil { waiting.responder("\(i)") != nil })
        if how == "close" { c.close() } else { c.abort() }
        #expect(pollUntil { waiting.stopped.contains("\(i)") }, "\(how)")
        #expect(pollUntil { server.inFlightRequests == 0 && server.openConnections == 0 }, "\(how)")
        let responder = try #require(waiting.responder("\(i)"))
        #expect(responder.isDone)
        #expect(!responder.respond(.text("too late")))
      }
      // The descriptors are reused by new connections, which a late answer never reaches.
      let c = try WireConnection(port: server.boundPort)
      try c.send("GET /plain/new HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(try c.readResponse().text == "plain new")
      #expect(pollUntil { server.requestContextCounts == (made: 3, ended: 3) })
    }
  }

  /// Neither the idle timeout nor the head timeout reaps a request waiting for its answer: the
  /// handler bounds its own wait. The idle timeout counts again from the answer.
  @Test func aWaitingRequestIsNotReapedAsIdle() throws {
    let waiting = Waiting()
    try withServer(
      {
        $0.connectionTimeout = 1
        $0.requestHeadTimeout = 1
      }, handler: laterRouter(waiting)
    ) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("GET /later/1 HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(pollUntil { waiting.count == 1 })
      usleep(2_600_000)
      #expect(waiting.stopped.isEmpty)
      waiting.responder("1")?.respond(.text("after the timeouts"))
      #expect(try c.readResponse().text == "after the timeouts")
      // Then idle again: the connection is closed by the idle timeout as any other.
      #expect(pollUntil(timeout: .seconds(10)) { c.isClosedByServer() })
    }
  }

  /// An answered responder drops the hooks that hold it (a long poll's do), so it is released.
  @Test func anAnsweredResponderIsReleasedWithItsHooks() {
    let delivered = Mutex(0)
    weak var released: HTTPResponder?
    do {
      let responder = HTTPResponder(deliver: { _ in
        delivered.withLock { $0 += 1 }
        return true
      })
      responder.onStopWaiting { _ = responder.isDone }
      released = responder
      #expect(responder.respond(.text("a")))
      #expect(!responder.respond(.text("b")))
      // Once answered, a hook is never kept (nor run).
      responder.onStopWaiting { Issue.record("a hook ran after the answer") }
    }
    #expect(released == nil)
    #expect(delivered.withLock { $0 } == 1)
  }

  /// Draining asks a waiting handler to answer now: its answer still goes out (with
  /// `Connection: close`) and the drain completes in time.
  @Test func drainingAsksAWaitingHandlerToAnswerNow() throws {
    let waiting = Waiting()
    var configuration = HTTPServer.Configuration.loopback
    configuration.threadPoolSize = 2
    let server = HTTPServer(configuration: configuration, handler: laterRouter(waiting, hurry: true))
    try server.start()
    defer { server.shutdown(timeout: .seconds(1)) }
    let c = try WireConnection(port: server.boundPort)
    try c.send("GET /later/1 HTTP/1.1\r\nHost: x\r\n\r\n")
    #expect(pollUntil { waiting.count == 1 })
    let started = ContinuousClock.now
    #expect(server.shutdown(timeout: .seconds(20)))
    #expect(ContinuousClock.now - started < .seconds(10))
    let r = try c.readResponse()
    #expect(r.status == 200 && r.text == "stopped 1" && r["Connection"] == "close")
  }

  /// A handler that does not answer by the drain's deadline is cut off: the connection is
  /// closed, the handler hears it, and its answer afterwards does nothing.
  @Test func aShutdownClosesAWaitThatNeverAnswers() throws {
    let waiting = Waiting()
    var configuration = HTTPServer.Configuration.loopback
    configuration.threadPoolSize = 2
    let server = HTTPServer(configuration: configuration, handler: laterRouter(waiting))
    try server.start()
    let c = try WireConnection(port: server.boundPort)
    try c.send("GET /later/1 HTTP/1.1\r\nHost: x\r\n\r\n")
    #expect(pollUntil { waiting.count == 1 })
    #expect(!server.shutdown(timeout: .milliseconds(300)))
    #expect(waiting.stopped == ["1"])
    #expect(!(try #require(waiting.responder("1")).respond(.text("late"))))
    #expect(c.isClosedByServer())
  }
}
