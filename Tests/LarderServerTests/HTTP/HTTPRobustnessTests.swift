import Foundation
import Larder
import LarderTestSupport
import LarderLogging
import Synchronization
import Testing

@testable import LarderHTTP
@testable import LarderServer

/// Routes that refuse from the head alone, as Larder's rules, name checks and tus PATCH do.
private func refusingRouter() -> Router {
  var router = testRouter()
  router.add("POST", "/deny", route: "deny") { _, _ in
    .respond(.error(status: 403, message: "permission denied"))
  }
  router.add("POST", "/noname", route: "noname") { _, _ in .respond(.error(status: 400, message: "no name")) }
  router.add("PATCH", "/conflict", route: "conflict") { _, _ in
    .respond(.error(status: 409, message: "offset mismatch"))
  }
  return router
}

/// Writes the head and the whole body before reading, as Python's http.client and node do, and
/// returns the answer: a refusal must survive the body the server never wanted.
private func sendWholeBodyThenRead(
  port: Int, _ method: String, _ target: String, size: Int, extra: String = ""
)
  throws -> WireResponse
{
  let c = try WireConnection(port: port)
  try c.send("\(method) \(target) HTTP/1.1\r\nHost: x\r\nContent-Length: \(size)\r\n\(extra)\r\n")
  try c.send(testBytes(size, seed: UInt64(size)))
  return try c.readResponse()
}

@Suite struct RefusalBeforeBodyTests {
  @Test func clientWritingTheWholeBodyReadsTheRefusalEveryTime() throws {
    try withServer(handler: refusingRouter()) { server in
      for (method, target, status) in [
        ("POST", "/deny", 403), ("POST", "/noname", 400), ("PATCH", "/conflict", 409),
      ] {
        for round in 0..<20 {
          let size = (1 + round % 8) << 20
          let r = try sendWholeBodyThenRead(port: server.boundPort, method, target, size: size)
          #expect(r.status == status, "\(target) round \(round)")
          #expect(r.error?["code"] as? Int == status)
          #expect(r.headers["Content-Type"] == "application/json; charset=utf-8")
        }
      }
    }
  }

  @Test func declaredSizeOverTheLimitIs413EvenWhenTheBodyIsWritten() throws {
    try withServer({ $0.maxBodyBytes = 1000 }, handler: refusingRouter()) { server in
      for round in 0..<20 {
        let r = try sendWholeBodyThenRead(
          port: server.boundPort, "PUT", "/upload", size: (1 + round % 8) << 20)
        #expect(r.status == 413, "round \(round)")
        #expect(r.error?["status"] as? String == "OUT_OF_RANGE")
      }
    }
  }

  @Test func expectContinueGetsTheRefusalInsteadOfContinue() throws {
    try withServer(handler: refusingRouter()) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("POST /deny HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\nExpect: 100-continue\r\n\r\n")
      let r = try c.readResponse(interim: true)
      #expect(r.status == 403)
      #expect(r.error?["status"] as? String == "PERMISSION_DENIED")
      #expect(c.isClosedByServer())
    }
  }

  @Test func refusalDoesNotLogAnInternalError() throws {
    let messages = MemoryLogHandler()
    try withServer({ $0.logger = Logger(label: "larder.http", handler: messages) }, handler: refusingRouter())
    {
      server in
      let r = try sendWholeBodyThenRead(port: server.boundPort, "POST", "/deny", size: 1 << 20)
      #expect(r.status == 403)
      #expect(pollUntil { server.inFlightRequests == 0 })
    }
    let lines = messages.records.map(\.message)
    #expect(!lines.contains { $0.contains("internal error") }, "\(lines)")
  }
}

@Suite struct RequestFramingTests {
  @Test func twoContentLengthsAre400AndThePipelinedRequestIsNotServed() throws {
    try withServer(handler: testRouter()) { server in
      for lengths in [["5", "6"], ["5", "5"]] {
        let c = try WireConnection(port: server.boundPort)
        var head = "PUT /upload HTTP/1.1\r\nHost: x\r\n"
        for l in lengths { head += "Content-Length: \(l)\r\n" }
        try c.send(head + "\r\nhello!GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try c.readResponse()
        #expect(r.status == 400)
        #expect(r.error?["message"] as? String == "conflicting Content-Length values")
        #expect(c.isClosedByServer())
      }
    }
  }

  @Test func contentLengthWithChunkedIs400AndCloses() throws {
    let events = SinkEvents()
    try withServer(handler: testRouter(events: events)) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send(
        "PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
          + "5\r\nhello\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      let r = try c.readResponse()
      #expect(r.status == 400)
      #expect(r.error?["message"] as? String == "Content-Length together with Transfer-Encoding")
      #expect(c.isClosedByServer())
      #expect(events.read().received == 0 && events.read().finishes == 0)
    }
  }

  @Test func transferEncodingOtherThanChunkedIs501() throws {
    try withServer(handler: testRouter()) { server in
      for coding in ["gzip", "gzip, chunked", "chunked, chunked", "identity"] {
        let c = try WireConnection(port: server.boundPort)
        try c.send(
          "PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \(coding)\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        let r = try c.readResponse()
        #expect(r.status == 501, "\(coding)")
        #expect(r.error?["status"] as? String == "UNIMPLEMENTED")
        #expect(c.isClosedByServer())
      }
    }
  }

  @Test func http11WithoutHostIs400AndHTTP10IsServed() throws {
    try withServer(handler: testRouter()) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("GET /hello HTTP/1.1\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      let r = try c.readResponse()
      #expect(r.status == 400)
      #expect(r.error?["message"] as? String == "an HTTP/1.1 request needs a Host header")
      #expect(c.isClosedByServer())
      let old = try WireConnection(port: server.boundPort)
      try old.send("GET /hello HTTP/1.0\r\n\r\n")
      #expect(try old.readResponse().text == "hello world")
    }
  }

  @Test func bodilessGetWithExpectContinueThenPipelinedGetsBothAnswers() throws {
    try withServer(handler: testRouter()) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send(
        "GET /hello HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\nGET /echo/a HTTP/1.1\r\nHost: x\r\n\r\n"
      )
      #expect(try c.readResponse().text == "hello world")
      #expect(try c.readResponse().text == #"{"name":"a","q":"-","raw":"a"}"#)
    }
  }
}

@Suite struct ConnectionLifecycleTests {
  @Test func requestsTheLibraryDropsAreEndedExactlyOnce() throws {
    let metrics = Metrics()
    let dropped = Atomic<Int>(0)
    // libmicrohttpd 0.9.75 ran out of pool for the argument records and closed without an
    // answer; the engine answers every one, and each is logged once.
    let server = try startedServer(handler: testRouter(metrics: metrics), metrics: metrics) { line in
      if line.contains(#""outcome":"ok""#) { dropped.add(1, ordering: .relaxed) }
    }
    let query = Array(repeating: "a=1", count: 1000).joined(separator: "&")
    for _ in 0..<1000 {
      let c = try WireConnection(port: server.boundPort)
      try? c.send("GET /hello?\(query) HTTP/1.1\r\nHost: x\r\n\r\n")
      _ = try? c.readResponse()
    }
    #expect(pollUntil { server.requestContextCounts.ended == 1000 })
    #expect(dropped.load(ordering: .relaxed) == 1000)
    #expect(server.requestContextCounts.made == 1000)
    #expect(server.inFlightRequests == 0)
    let c = try WireConnection(port: server.boundPort)
    try c.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    // The request reading /metrics is itself in flight.
    #expect(try c.readResponse().text.split(separator: "\n").contains("larder_http_requests_in_flight 1"))
    c.close()
    let started = ContinuousClock.now
    #expect(server.shutdown(timeout: .seconds(30)))
    #expect(ContinuousClock.now - started < .seconds(5))
    let counts = server.requestContextCounts
    #expect(counts.made == counts.ended)
  }

  @Test func aHeadTricklingInIsCutAtTheHeadDeadline() throws {
    try withServer({ $0.requestHeadTimeout = 1 }, handler: testRouter()) { server in
      let slow = try WireConnection(port: server.boundPort)
      let started = ContinuousClock.now
      try slow.send("GET /hello HTTP/1.1\r\nHost: x\r\n")
      var closed = false
      for i in 0..<30 {
        usleep(200_000)
        if (try? slow.send("X-\(i): y\r\n")) == nil { break }
        if ContinuousClock.now - started > .seconds(4) { break }
      }
      closed = slow.isClosedByServer()
      #expect(closed)
      #expect(ContinuousClock.now - started < .seconds(5))
      #expect(pollUntil { server.openConnections == 0 })
      let good = try WireConnection(port: server.boundPort)
      try good.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(try good.readResponse().text == "hello world")
    }
  }

  @Test func defaultsBoundOneAddressAndRaiseTheOpenFileLimit() throws {
    #expect(HTTPServer.Configuration().perIPConnectionLimit == 64)
    #expect(HTTPServer.Configuration().requestHeadTimeout == 30)
    try withServer(handler: testRouter()) { _ in
      var limit = rlimit()
      #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
      #expect(limit.rlim_cur == limit.rlim_max)
    }
  }
}

@Suite struct ResourceExhaustionTests {
  @Test func connectionLimitIsSizedFromTheOpenFileLimit() {
    #expect(ResourceLimits.connectionLimit(configured: 1024, openFiles: 1024) == 448)
    #expect(ResourceLimits.connectionLimit(configured: 1024, openFiles: 1_048_576) == 1024)
    #expect(ResourceLimits.connectionLimit(configured: 1024, openFiles: 64) == 16)
    #expect(ResourceLimits.lingeringLimit(openFiles: 1_048_576, connectionLimit: 1024) == 512)
    #expect(ResourceLimits.lingeringLimit(openFiles: 256, connectionLimit: 64) == 64)
    #expect(ResourceLimits.lingeringLimit(openFiles: 1024, connectionLimit: 448) == 64)
  }

  @Test func outOfDescriptorsOrMemoryIs503WithRetryAfter() throws {
    let request = try HTTPRequest(method: "POST", target: "/v0/b/app/o?name=a")
    for code in [EMFILE, ENFILE, ENOMEM, ENOBUFS] {
      let error = LarderError.io(operation: "open", path: "/data/tmp/x", errno: code)
      let r = APIError.response(
        for: error, request: request, logger: Logger(label: "test", handler: MemoryLogHandler()))
      #expect(r.status == 503)
      #expect(r.headers["Retry-After"] == "1")
      #expect(r.body.length > 0)
    }
    let other = LarderError.io(operation: "open", path: "/data/tmp/x", errno: EIO)
    #expect(
      APIError.response(
        for: other, request: request, logger: Logger(label: "test", handler: MemoryLogHandler())
      ).status == 500)
  }
}

private func startedServer(
  handler: any HTTPHandler, metrics: Metrics, accessLog: @escaping @Sendable (String) -> Void
) throws -> HTTPServer {
  var configuration = HTTPServer.Configuration.loopback
  configuration.accessLog = .custom(accessLog)
  let server = HTTPServer(configuration: configuration, handler: handler, metrics: metrics)
  try server.start()
  return server
}
