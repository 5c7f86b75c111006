import Foundation
import Synchronization
import Testing

@testable import LarderHTTP

/// Sends `text` on a new connection and reads one answer; the pipelined `GET /hello` after it
/// must never be answered.
private func refusal(_ port: Int, _ text: String) throws -> (WireResponse, closed: Bool) {
  let c = try WireConnection(port: port)
  try c.send(text + "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
  let r = try c.readResponse()
  return (r, c.isClosedByServer())
}

/// RFC 9112's request-smuggling list (§6.1, §6.3, §11.2) and the head errors HTTP libraries are known to answer
/// with a 500 or a silent close: each gets its status, a JSON error, `Connection: close`, and
/// nothing after it on the connection is served.
@Suite struct RequestSmugglingTests {
  @Test func everyAmbiguousOrMalformedHeadIsAnsweredAndClosed() throws {
    let cases: [(String, Int)] = [
      ("GET /hello HTTP/1.1\r\nHost: x\r\nX-A: b\r\n folded\r\n\r\n", 400),
      ("GET /hello HTTP/1.1\r\nHost: x\r\nX-A: b\rc\r\n\r\n", 400),
      ("GET /hello HTTP/1.1\nHost: x\n\n", 400),
      ("GET /hello HTTP/1.1\r\nHost : x\r\n\r\n", 400),
      ("GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
      ("GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\nhello", 400),
      ("GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello", 400),
      ("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400),
      ("PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 501),
      ("PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n", 501),
      ("PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400),
      ("PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n", 400),
      ("PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", 400),
      ("PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello!\r\n0\r\n\r\n", 400),
      ("PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;" + String(repeating: "e", count: 8192) + "\r\nhello\r\n0\r\n\r\n", 413),
      ("GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "b", count: 17 * 1024) + "\r\n\r\n", 431),
      ("GET /" + String(repeating: "a", count: 17 * 1024) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414),
      ("GET /hello HTTP/2.0\r\nHost: x\r\n\r\n", 505),
      ("GET /hello HTTP/1.1\r\n\r\n", 400),
    ]
    let events = SinkEvents()
    try withServer(handler: testRouter(events: events)) { server in
      for (text, status) in cases {
        let (r, closed) = try refusal(server.boundPort, text)
        let what = String(text.prefix(60)).debugDescription
        #expect(r.status == status, "\(what)")
        #expect(r.headers["Connection"] == "close", "\(what)")
        #expect(r.error?["code"] as? Int == status, "\(what)")
        #expect(closed, "\(what)")
      }
      #expect(events.read().finishes == 0)
      #expect(pollUntil { server.inFlightRequests == 0 })
      let counts = server.requestContextCounts
      #expect(counts.made == cases.count && counts.ended == cases.count)
    }
  }

  @Test func aChunkedBodyWithExtensionsAndTrailersIsDecodedAndThePipelinedRequestServed() throws {
    try withServer(handler: testRouter()) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send(
        "PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
          + "5;a=b\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      let r = try c.readResponse()
      let json = try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: String]
      #expect(json?["size"] == "11")
      #expect(try c.readResponse().text == "hello world")
    }
  }
}

@Suite struct EpollEngineTests {
  @Test func pastThePerAddressLimitIs503WithRetryAfterNotAReset() throws {
    try withServer({ $0.perIPConnectionLimit = 2 }, handler: testRouter()) { server in
      let admitted = try (0..<2).map { _ in try WireConnection(port: server.boundPort) }
      for c in admitted {
        try c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try c.readResponse().status == 200)
      }
      for _ in 0..<5 {
        let c = try WireConnection(port: server.boundPort)
        try? c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try c.readResponse()
        #expect(r.status == 503)
        #expect(r.headers["Retry-After"] == "1")
        #expect(r.error?["status"] as? String == "UNAVAILABLE")
        #expect(c.isClosedByServer())
      }
      admitted[0].close()
      #expect(pollUntil { server.openConnections == 1 })
      let d = try WireConnection(port: server.boundPort)
      try d.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(try d.readResponse().text == "hello world")
    }
  }

  /// Loops accepting at the same moment never pass the connection limit together: each takes its
  /// slot in one step before `accept`. (CI once saw 65 of 64 when two loops both read 63 as "not
  /// full" and both accepted.)
  @Test func loopsAcceptingAtOnceNeverPassTheConnectionLimit() throws {
    try withServer({ $0.connectionLimit = 4; $0.threadPoolSize = 4; $0.perIPConnectionLimit = 0 },
      handler: testRouter())
    { server in
      for round in 0..<25 {
        let lock = NSLock()
        nonisolated(unsafe) var opened: [WireConnection] = []
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
          for _ in 0..<4 {
            guard let c = try? WireConnection(port: server.boundPort) else { continue }
            try? c.send("GET /hello HTTP/1.1\r\nHost: x\r\n")
            lock.withLock { opened.append(c) }
          }
        }
        #expect(opened.count == 32, "round \(round)")
        #expect(pollUntil { server.openConnections >= 4 }, "round \(round)")
        usleep(50_000)
        #expect(server.openConnections == 4, "round \(round)")
        for c in opened { c.close() }
        #expect(pollUntil { server.openConnections == 0 }, "round \(round)")
      }
    }
  }

  /// `100 Continue` goes out only once the handler has judged the head: a refused upload costs
  /// no body, and an accepted one gets its `100` before the client sends a byte.
  @Test func continueIsSentOnlyAfterTheHandlerAcceptsTheHead() throws {
    let judged = Atomic<Int>(0)
    var router = testRouter()
    router.add("PUT", "/slow-judge", route: "slow") { _, _ in
      usleep(300_000)
      judged.add(1, ordering: .relaxed)
      return .respond(.error(status: 423, message: "locked"))
    }
    try withServer(handler: router) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("PUT /slow-judge HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n")
      let r = try c.readResponse(interim: true)
      #expect(r.status == 423)
      #expect(judged.load(ordering: .relaxed) == 1)
      #expect(c.isClosedByServer())

      let d = try WireConnection(port: server.boundPort)
      try d.send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
      #expect(try d.readResponse(interim: true).status == 100)
      try d.send("hello")
      #expect(try d.readResponse().status == 200)
    }
  }

  /// A handler that blocks (a render, a store read) holds a worker, not a loop: with one loop,
  /// small requests on other connections are answered meanwhile.
  @Test func aBlockedHandlerDoesNotHoldTheLoop() throws {
    let release = Atomic<Bool>(false)
    var router = testRouter()
    router.add("GET", "/block", route: "block") { _, _ in
      while !release.load(ordering: .relaxed) { usleep(5_000) }
      return .respond(.text("done"))
    }
    try withServer({ $0.threadPoolSize = 1 }, handler: router) { server in
      var blocked: [WireConnection] = []
      for _ in 0..<4 {
        let c = try WireConnection(port: server.boundPort)
        try c.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
        blocked.append(c)
      }
      for _ in 0..<20 {
        let c = try WireConnection(port: server.boundPort)
        try c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try c.readResponse().text == "hello world")
      }
      release.store(true, ordering: .relaxed)
      for c in blocked { #expect(try c.readResponse().text == "done") }
    }
  }

  @Test func largeBytesFilesAndHeadsGoOutExactlyOnOneKeptConnection() throws {
    let path = NSTemporaryDirectory() + "larder-epoll-\(UUID().uuidString)"
    let bytes = testBytes(3 * 1024 * 1024 + 17)
    #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
    defer { unlink(path) }
    var router = testRouter(file: path)
    let big = testBytes(200_000, seed: 9)
    router.add("GET", "/big", route: "big") { _, _ in .respond(HTTPResponse(body: .bytes(big))) }
    try withServer(handler: router) { server in
      let c = try WireConnection(port: server.boundPort)
      for _ in 0..<3 {
        try c.send("GET /file HTTP/1.1\r\nHost: x\r\n\r\nGET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try c.readResponse().body == bytes)
        #expect(try c.readResponse().body == big)
        try c.send("HEAD /size HTTP/1.1\r\nHost: x\r\n\r\nGET /file?offset=5&length=3 HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = try c.readResponse(head: true)
        #expect(head.headers["Content-Length"] == "123456")
        #expect(try c.readResponse().body == Array(bytes[5..<8]))
      }
    }
  }

  /// A response field holding a CR or an LF would end the head early and let a client's value
  /// write headers or a body of its own (response splitting): such a field is dropped, wherever
  /// the break falls in it, and the rest of the answer goes out whole. The head's own decimals
  /// (Content-Length) are written without a String in between: checked at several sizes.
  @Test func aResponseFieldWithALineBreakIsDroppedAndTheRestSent() throws {
    let values = [
      "a\rb", "x\n", "\ninjected: 1", "1234567\r", "12345678\n", "123456789012345\r\nSet-Cookie: s=1",
      String(repeating: "v", count: 64) + "\n",
    ]
    var router = Router()
    router.add("GET", "/split/{n}", route: "split") { _, params in
      let n = Int(try params.decoded("n"))!
      var response = HTTPResponse(body: .bytes(Array(repeating: 0x61, count: n)))
      response.headers.set("X-Before", "kept")
      for (i, value) in values.enumerated() { response.headers.add("X-Bad-\(i)", value) }
      response.headers.add("X-Bad\nName", "v")
      response.headers.set("X-After", String(repeating: "z", count: 17))
      return .respond(response)
    }
    try withServer(handler: router) { server in
      let c = try WireConnection(port: server.boundPort)
      for n in [0, 9, 10, 99, 100, 4096, 123_456] {
        try c.send("GET /split/\(n) HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try c.readResponse()
        #expect(r.status == 200)
        #expect(r.body == Array(repeating: 0x61, count: n))
        #expect(r.headers["Content-Length"] == "\(n)")
        #expect(r.headers["X-Before"] == "kept")
        #expect(r.headers["X-After"] == String(repeating: "z", count: 17))
        #expect(r.headers.fields.filter { $0.name.hasPrefix("X-Bad") }.isEmpty, "\(r.headers.fields)")
        #expect(r.headers["injected"] == nil && r.headers["Set-Cookie"] == nil)
      }
    }
  }

  /// A client that sends its request and half-closes (`shutdown(SHUT_WR)`, reading until EOF)
  /// gets its answer and then the close at once, not after the idle timeout: the engine skips
  /// the read after a short one (the socket is empty) only while the peer has not half-closed,
  /// since a FIN that came with the request is reported by no later event.
  @Test func aClientThatHalfClosesGetsItsAnswerAndTheCloseAtOnce() throws {
    var router = Router()
    router.add("GET", "/hello", route: "hello") { _, _ in .respond(.text("hello")) }
    try withServer({ $0.connectionTimeout = 30 }, handler: router) { server in
      for round in 0..<5 {
        let c = try WireConnection(port: server.boundPort)
        // Two pipelined requests, the second after a pause, then the FIN right behind it.
        try c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try c.readResponse().text == "hello")
        if round % 2 == 1 { Thread.sleep(forTimeInterval: 0.05) }
        try c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        shutdown(c.fd, Int32(SHUT_WR))
        #expect(try c.readResponse().text == "hello")
        let started = ContinuousClock.now
        #expect(c.isClosedByServer())
        #expect(ContinuousClock.now - started < .seconds(10), "round \(round): closed only after the idle timeout")
      }
    }
  }

  /// A sealed header set (its wire form worked out once, for answers cached with their row) goes
  /// out exactly as the same fields unsealed would, through every later change: a field added, a
  /// set appended, a field replaced or removed, a field with a line break (dropped either way), a
  /// field the engine writes itself (`Content-Length`: its own value wins).
  @Test func aSealedHeaderSetGoesOutAsTheSameFieldsUnsealed() throws {
    let base: HTTPHeaders = ["ETag": "\"abc\"", "Cache-Control": "private, max-age=0", "X-Goog-Generation": "7"]
    let more: HTTPHeaders = ["Content-Type": "text/plain", "Content-Security-Policy": "default-src 'none'; sandbox"]
    let changes: [(String, @Sendable (inout HTTPHeaders) -> Void)] = [
      ("none", { _ in }),
      ("add", { $0.add("Content-Range", "bytes 0-1/2") }),
      ("append", { $0.append(contentsOf: more.sealed()) }),
      ("append-unsealed", { $0.append(contentsOf: more) }),
      ("set-existing", { $0.set("Cache-Control", "no-store") }),
      ("set-new", { $0.set("Vary", "Origin") }),
      ("remove", { $0.remove("ETag") }),
      ("remove-absent", { $0.remove("X-None") }),
      ("line-break", { $0.add("X-Bad", "a\r\nSet-Cookie: s=1"); $0.add("X-Good", "after") }),
      ("content-length", { $0.add("Content-Length", "999") }),
    ]
    var router = Router()
    router.add("GET", "/h/{sealed}/{change}", route: "h") { _, params in
      var headers = try params.decoded("sealed") == "yes" ? base.sealed() : base
      let change = try params.decoded("change")
      changes.first { $0.0 == change }!.1(&headers)
      return .respond(HTTPResponse(status: 200, headers: headers, body: .bytes(Array("ok".utf8))))
    }
    try withServer(handler: router) { server in
      let c = try WireConnection(port: server.boundPort)
      func fields(_ sealed: String, _ change: String) throws -> [HTTPHeaders.Field] {
        try c.send("GET /h/\(sealed)/\(change) HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try c.readResponse()
        #expect(r.body == Array("ok".utf8))
        return r.headers.fields.filter { !["X-Request-Id", "Date"].contains($0.name) }
      }
      for (change, _) in changes {
        let unsealed = try fields("no", change)
        #expect(try fields("yes", change) == unsealed, "\(change)")
        #expect(unsealed.filter { $0.name == "Content-Length" }.map(\.value) == ["2"], "\(change)")
        #expect(!unsealed.contains { $0.name == "X-Bad" || $0.name == "Set-Cookie" }, "\(change)")
      }
      #expect(try fields("yes", "add").map(\.name) == ["ETag", "Cache-Control", "X-Goog-Generation", "Content-Range", "Content-Length"])
      #expect(try fields("yes", "line-break").map(\.name).contains("X-Good"))
    }
    // Equality is the fields', whatever was worked out for the wire.
    #expect(base.sealed() == base)
  }
}
