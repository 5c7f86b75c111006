import Foundation
import LarderCrypto
import LarderHTTP
import LarderServer
import LarderTestSupport
import Synchronization
import Testing

@Suite struct HTTPServerTests {
  @Test func getAndHeadReturnExactBytesAndRequestID() throws {
    try withServer(handler: testRouter()) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Request-Id: abc-123\r\n\r\n")
      let get = try c.readResponse()
      #expect(get.status == 200)
      #expect(get.text == "hello world")
      #expect(get.headers["Content-Length"] == "11")
      #expect(get.headers["Content-Type"] == "text/plain; charset=utf-8")
      #expect(get.headers["X-Request-Id"] == "abc-123")

      try c.send("HEAD /hello HTTP/1.1\r\nHost: x\r\nX-Request-Id: bad id with spaces\r\n\r\n")
      let head = try c.readResponse(head: true)
      #expect(head.status == 200)
      #expect(head.headers["Content-Length"] == "11")
      let id = head.headers["X-Request-Id"] ?? ""
      #expect(id.count == 32 && id.allSatisfy { $0.isHexDigit })

      try c.send("HEAD /size HTTP/1.1\r\nHost: x\r\n\r\n")
      let size = try c.readResponse(head: true)
      #expect(size.status == 200)
      #expect(size.headers["Content-Length"] == "123456")
      // The HEAD responses carried no body: the connection is still in sync.
      try c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(try c.readResponse().text == "hello world")
    }
  }

  @Test func fileResponsesAreSentExactly() throws {
    let bytes = testBytes(10 * 1024 * 1024)
    let path = NSTemporaryDirectory() + "larder-http-\(UUID().uuidString)"
    #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
    defer { unlink(path) }
    try withServer(handler: testRouter(file: path)) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("GET /file HTTP/1.1\r\nHost: x\r\n\r\n")
      let full = try c.readResponse()
      #expect(full.status == 200)
      #expect(full.headers["Content-Length"] == "10485760")
      #expect(full.body.count == bytes.count)
      #expect(Digest.hash(.sha256, full.body) == Digest.hash(.sha256, bytes))

      try c.send("GET /file?offset=1000&length=5000 HTTP/1.1\r\nHost: x\r\n\r\n")
      let part = try c.readResponse()
      #expect(part.headers["Content-Length"] == "5000")
      #expect(part.body == Array(bytes[1000..<6000]))

      try c.send("HEAD /file HTTP/1.1\r\nHost: x\r\n\r\n")
      let head = try c.readResponse(head: true)
      #expect(head.headers["Content-Length"] == "10485760")
      try c.send("GET /file?offset=10485759&length=1 HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(try c.readResponse().body == [bytes[10_485_759]])
    }
  }

  @Test func hundredMiBUploadStreamsWithFlatMemory() throws {
    let events = SinkEvents()
    let memoryLimit = 64 * 1024
    let chunk = testBytes(1024 * 1024)
    let total = 100
    let expected = Digest(.sha256)
    for _ in 0..<total { expected.update(chunk) }
    let expectedHex = Hex.encode(expected.finalize())
    try withServer({ $0.connectionMemoryLimit = memoryLimit }, handler: testRouter(events: events)) {
      server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: \(total * chunk.count)\r\n\r\n")
      for _ in 0..<total { try c.send(chunk) }
      let response = try c.readResponse()
      #expect(response.status == 200)
      let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String]
      #expect(json == ["size": "104857600", "sha256": expectedHex])
      let state = events.read()
      #expect(state.received == 104_857_600)
      #expect(state.maxChunk > 0 && state.maxChunk <= memoryLimit)
      #expect(state.finishes == 1)
      #expect(state.cancels == 0)
    }
  }

  @Test func chunkedUploadIsDecoded() throws {
    let events = SinkEvents()
    try withServer(handler: testRouter(events: events)) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send(
        "PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
      )
      let response = try c.readResponse()
      let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String]
      #expect(json == ["size": "11", "sha256": Hex.encode(Digest.hash(.sha256, Array("hello world".utf8)))])
    }
  }

  @Test func clientDisconnectMidUploadCancelsOnce() throws {
    let events = SinkEvents()
    try withServer(handler: testRouter(events: events)) { server in
      do {
        let c = try WireConnection(port: server.boundPort)
        try c.send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n")
        try c.send(testBytes(1024 * 1024))
        #expect(pollUntil { events.read().received > 0 })
        c.abort()
      }
      #expect(pollUntil { events.read().cancels > 0 })
      #expect(pollUntil { server.inFlightRequests == 0 })
      let state = events.read()
      #expect(state.cancels == 1)
      #expect(state.finishes == 0)
    }
  }

  @Test func declaredBodyOverLimitGets413WithoutReading() throws {
    let events = SinkEvents()
    try withServer({ $0.maxBodyBytes = 1000 }, handler: testRouter(events: events)) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")
      let response = try c.readResponse()
      #expect(response.status == 413)
      let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: [String: Any]]
      #expect(json?["error"]?["code"] as? Int == 413)
      #expect(json?["error"]?["status"] as? String == "OUT_OF_RANGE")
      #expect(c.isClosedByServer())
      let state = events.read()
      #expect(state.received == 0 && state.finishes == 0 && state.cancels == 0)
    }
  }

  @Test func sinkErrorMidBodyBecomesTheResponse() throws {
    let events = SinkEvents()
    try withServer(handler: testRouter(events: events)) { server in
      let c = try WireConnection(port: server.boundPort)
      let body = testBytes(512 * 1024)
      try c.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n\r\n")
      try? c.send(body)  // the server may stop reading once it has answered
      let response = try c.readResponse()
      #expect(response.status == 413)
      let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: [String: Any]]
      #expect(json?["error"]?["maxSize"] as? Int == 262_144)
      #expect(pollUntil { events.read().cancels == 1 })
      #expect(events.read().finishes == 0)
    }
  }

  @Test func expectContinueIsAnswered() throws {
    let events = SinkEvents()
    try withServer(handler: testRouter(events: events)) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
      let interim = try c.readResponse(interim: true)
      #expect(interim.status == 100)
      try c.send("hello")
      let final = try c.readResponse()
      #expect(final.status == 200)
      let json = try JSONSerialization.jsonObject(with: Data(final.body)) as? [String: String]
      #expect(json?["size"] == "5")
    }
  }

  @Test func keepAliveAndPipelining() throws {
    try withServer(handler: testRouter()) { server in
      let c = try WireConnection(port: server.boundPort)
      for _ in 0..<3 {
        try c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try c.readResponse()
        #expect(r.status == 200 && r.text == "hello world")
        #expect(r.headers["Connection"]?.lowercased() != "close")
      }
      try c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /echo/a%2Fb?q=1 HTTP/1.1\r\nHost: x\r\n\r\n")
      let first = try c.readResponse()
      let second = try c.readResponse()
      #expect(first.text == "hello world")
      #expect(second.text == #"{"name":"a/b","q":"1","raw":"a%2Fb"}"#)
      // A bodiless error answer keeps the connection too.
      try c.send("GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(try c.readResponse().status == 404)
      #expect(try c.readResponse().text == "hello world")
    }
  }

  @Test func hugeHeaderIsRefusedCleanly() throws {
    try withServer(handler: testRouter()) { server in
      let c = try WireConnection(port: server.boundPort)
      let big = String(repeating: "a", count: 64 * 1024)
      try? c.send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: \(big)\r\n\r\n")
      let r = try c.readResponse()
      #expect(r.status == 431)
      // Just over the configured header limit but within MHD's buffer: our own 431.
      let d = try WireConnection(port: server.boundPort)
      try d.send(
        "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 17 * 1024))\r\n\r\n")
      #expect(try d.readResponse().status == 431)
      let e = try WireConnection(port: server.boundPort)
      try e.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(try e.readResponse().text == "hello world")
    }
  }

  @Test func unknownMethodAndPath() throws {
    try withServer(handler: testRouter()) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("BREW /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      let r = try c.readResponse()
      #expect(r.status == 405)
      #expect(r.headers["Allow"] == "GET, HEAD")
      try c.send("DELETE /upload HTTP/1.1\r\nHost: x\r\n\r\n")
      let u = try c.readResponse()
      #expect(u.status == 405)
      #expect(u.headers["Allow"] == "POST, PUT")
      try c.send("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
      let n = try c.readResponse()
      #expect(n.status == 404)
      let json = try JSONSerialization.jsonObject(with: Data(n.body)) as? [String: [String: Any]]
      #expect(json?["error"]?["status"] as? String == "NOT_FOUND")
    }
  }

  @Test func malformedPercentEncodingIs400() throws {
    try withServer(handler: testRouter()) { server in
      let c = try WireConnection(port: server.boundPort)
      for target in ["/echo/x?q=%zz", "/echo/x?q=%e9", "/echo/x?q=%4", "/echo/%zz"] {
        try c.send("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try c.readResponse()
        #expect(r.status == 400, "\(target)")
        let json = try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: [String: Any]]
        #expect(json?["error"]?["status"] as? String == "INVALID_ARGUMENT")
      }
      try c.send("GET /echo/x%20y?q=a%26b+c HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(try c.readResponse().text == #"{"name":"x y","q":"a&b+c","raw":"x%20y"}"#)
    }
  }

  @Test func gracefulShutdownFinishesInFlightAndRefusesNew() throws {
    let events = SinkEvents()
    var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
    configuration.threadPoolSize = 2
    configuration.accessLog = .disabled
    let server = HTTPServer(configuration: configuration, handler: testRouter(events: events))
    try server.start()
    let port = server.boundPort
    let c = try WireConnection(port: port)
    let body = testBytes(2 * 1024 * 1024)
    try c.send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n\r\n")
    try c.send(Array(body[0..<(1024 * 1024)]))
    #expect(pollUntil { events.read().received > 0 })

    let result = Mutex<Bool?>(nil)
    let thread = Thread {
      let drained = server.shutdown(timeout: .seconds(60))
      result.withLock { $0 = drained }
    }
    thread.start()
    #expect(pollUntil { (try? WireConnection(port: port)) == nil })
    #expect(result.withLock { $0 } == nil)

    try c.send(Array(body[(1024 * 1024)...]))
    let response = try c.readResponse()
    #expect(response.status == 200)
    #expect(response.headers["Connection"]?.lowercased() == "close")
    let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String]
    #expect(json == ["size": "2097152", "sha256": Hex.encode(Digest.hash(.sha256, body))])
    #expect(pollUntil { result.withLock { $0 } != nil })
    #expect(result.withLock { $0 } == true)
    #expect(events.read().cancels == 0)
  }

  @Test func shutdownDeadlineCancelsStalledUpload() throws {
    let events = SinkEvents()
    var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
    configuration.accessLog = .disabled
    let server = HTTPServer(configuration: configuration, handler: testRouter(events: events))
    try server.start()
    let c = try WireConnection(port: server.boundPort)
    try c.send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
    try c.send(testBytes(1000))
    #expect(pollUntil { events.read().received == 1000 })
    #expect(server.shutdown(timeout: .milliseconds(200)) == false)
    #expect(events.read().cancels == 1)
    #expect(events.read().finishes == 0)
  }

  /// Gauges registered together are read once per render (the server's two store figures come
  /// from one snapshot), each under its own name; registering a name again replaces its group.
  @Test func aGaugeGroupIsReadOncePerRender() {
    let metrics = Metrics()
    let reads = Mutex(0)
    metrics.registerGauges([("larder_b", "B."), ("larder_a", "A.")]) {
      reads.withLock { $0 += 1 }
      return [2, 1]
    }
    let text = metrics.renderPrometheus()
    #expect(reads.withLock { $0 } == 1)
    #expect(text.contains("# HELP larder_a A.\n# TYPE larder_a gauge\nlarder_a 1\n# HELP larder_b B.\n# TYPE larder_b gauge\nlarder_b 2\n"))
    metrics.registerGauge("larder_a", help: "A again.") { 7 }
    let again = metrics.renderPrometheus()
    #expect(reads.withLock { $0 } == 1)
    #expect(again.contains("larder_a 7\n"))
    #expect(!again.contains("larder_b"))
  }

  @Test func metricsAreRenderedInPrometheusFormat() throws {
    let metrics = Metrics()
    metrics.registerGauge("larder_objects", help: "Stored objects.") { 42 }
    try withServer(handler: testRouter(metrics: metrics), metrics: metrics) { server in
      let c = try WireConnection(port: server.boundPort)
      for _ in 0..<2 {
        try c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = try c.readResponse()
      }
      try c.send("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
      _ = try c.readResponse()
      #expect(pollUntil { metrics.requestCount(route: "unmatched", status: 404) == 1 })
      try c.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
      let text = try c.readResponse().text
      let lines = Set(text.split(separator: "\n").map(String.init))
      #expect(lines.contains("# TYPE larder_http_requests_total counter"))
      #expect(lines.contains(#"larder_http_requests_total{route="hello",status="200"} 2"#))
      #expect(lines.contains(#"larder_http_requests_total{route="unmatched",status="404"} 1"#))
      #expect(lines.contains(#"larder_http_response_body_bytes_total{route="hello"} 22"#))
      #expect(lines.contains(#"larder_http_request_body_bytes_total{route="hello"} 0"#))
      #expect(lines.contains("# TYPE larder_http_request_duration_seconds histogram"))
      #expect(lines.contains(#"larder_http_request_duration_seconds_bucket{route="hello",le="+Inf"} 2"#))
      #expect(lines.contains(#"larder_http_request_duration_seconds_count{route="hello"} 2"#))
      #expect(lines.contains("larder_objects 42"))
      #expect(lines.contains("# TYPE larder_http_requests_in_flight gauge"))
      // Every non-comment line is `name{labels} value` or `name value`.
      for line in lines where !line.hasPrefix("#") {
        #expect(line.split(separator: " ").count == 2, "\(line)")
      }
    }
  }

  @Test func accessLogLineIsJSONWithFields() throws {
    let lines = Mutex<[String]>([])
    try withServer(
      { $0.accessLog = .custom { line in lines.withLock { $0.append(line) } } }, handler: testRouter()
    ) {
      server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("GET /echo/a%2Fb?q=secret HTTP/1.1\r\nHost: x\r\nX-Request-Id: req-1\r\n\r\n")
      let r = try c.readResponse()
      #expect(pollUntil { lines.withLock { $0.count } == 1 })
      let line = lines.withLock { $0[0] }
      let json = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
      #expect(json["request_id"] as? String == "req-1")
      #expect(json["method"] as? String == "GET")
      #expect(json["path"] as? String == "/echo/a%2Fb")
      #expect(json["route"] as? String == "echo")
      #expect(json["status"] as? Int == 200)
      #expect(json["bytes_in"] as? Int == 0)
      #expect(json["bytes_out"] as? Int == r.body.count)
      #expect(json["remote"] as? String == "127.0.0.1")
      #expect(json["outcome"] as? String == "ok")
      #expect((json["duration_ms"] as? Double ?? -1) >= 0)
      #expect((json["time"] as? String)?.hasSuffix("Z") == true)
      #expect(Set(json.keys).count == 11)
    }
  }

  @Test func startFailsOnBadHostAndBusyPort() throws {
    let bad = HTTPServer(configuration: .init(host: "not-an-ip", port: 0), handler: testRouter())
    #expect(throws: HTTPServerError.invalidHost("not-an-ip")) { try bad.start() }
    try withServer(handler: testRouter()) { server in
      var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: server.boundPort)
        configuration.accessLog = .disabled
      let second = HTTPServer(configuration: configuration, handler: testRouter())
      #expect(throws: HTTPServerError.self) { try second.start() }
      #expect(throws: HTTPServerError.alreadyStarted) { try server.start() }
    }
  }
}

@Suite struct HTTPServerLimitsTests {
  @Test func idleTimeoutClosesStalledConnectionsAndCancelsUploads() throws {
    let events = SinkEvents()
    let lines = Mutex<[String]>([])
    try withServer(
      {
        $0.connectionTimeout = 1
        $0.accessLog = .custom { line in lines.withLock { $0.append(line) } }
      }, handler: testRouter(events: events)
    ) { server in
      let partial = try WireConnection(port: server.boundPort)
      try partial.send("GET /hel")
      #expect(partial.isClosedByServer())

      let upload = try WireConnection(port: server.boundPort)
      try upload.send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
      #expect(upload.isClosedByServer())
      #expect(pollUntil { events.read().cancels == 1 })
      #expect(events.read().finishes == 0)
      #expect(events.read().received == 10)
      #expect(pollUntil { lines.withLock { $0.contains { $0.contains(#""outcome":"timeout""#) } } })
    }
  }

  @Test func perIPConnectionLimitRefusesExtraConnections() throws {
    try withServer({ $0.perIPConnectionLimit = 2 }, handler: testRouter()) { server in
      let a = try WireConnection(port: server.boundPort)
      let b = try WireConnection(port: server.boundPort)
      try a.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      try b.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(try a.readResponse().status == 200)
      #expect(try b.readResponse().status == 200)
      let c = try WireConnection(port: server.boundPort)
      try? c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
      // A 503 first, then the close (not a reset; EpollEngineTests checks its headers).
      #expect(try c.readResponse().status == 503)
      #expect(c.isClosedByServer())
    }
  }

  @Test func accessLogFileThatCannotBeOpenedFailsStart() throws {
    var configuration = HTTPServer.Configuration()
    configuration.accessLog = .file("/nonexistent-dir/access.log")
    let server = HTTPServer(configuration: configuration, handler: testRouter())
    #expect(throws: HTTPServerError.accessLog(path: "/nonexistent-dir/access.log", errno: ENOENT)) { try server.start() }
  }

  @Test func sinkErrorWithLargeRemainderClosesTheConnection() throws {
    let events = SinkEvents()
    try withServer(handler: testRouter(events: events)) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n")
      try? c.send(testBytes(512 * 1024))
      // The answer is written before the close, then it closes.
      let r = try c.readResponse()
      #expect(r.status == 413)
      #expect(r.error?["maxSize"] as? Int == 262_144)
      #expect(r.headers["Connection"] == "close")
      #expect(c.isClosedByServer())
      #expect(pollUntil { events.read().cancels == 1 })
      #expect(events.read().finishes == 0)
    }
  }

  @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl")))
  func ipv6LoopbackServes() throws {
    try withServer({ $0.host = "::1" }, handler: testRouter()) { server in
      let (out, _) = try runCurl(["-sg", "http://[::1]:\(server.boundPort)/echo/x"])
      #expect(out == #"{"name":"x","q":"-","raw":"x"}"#)
    }
  }

  @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl")))
  func curlReusesConnectionAndSendsExpectContinue() throws {
    let events = SinkEvents()
    let path = NSTemporaryDirectory() + "larder-curl-\(UUID().uuidString)"
    let body = testBytes(3 * 1024 * 1024)
    #expect(FileManager.default.createFile(atPath: path, contents: Data(body)))
    defer { unlink(path) }
    try withServer(handler: testRouter(events: events)) { server in
      let base = "http://127.0.0.1:\(server.boundPort)"
      let (out, err) = try runCurl(["-sv", "\(base)/hello", "\(base)/hello"])
      #expect(out == "hello worldhello world")
      #expect(err.contains("Re-using existing connection") || err.contains("Reusing existing"))

      let (upload, log) = try runCurl(["-sv", "-T", path, "-H", "Expect: 100-continue", "\(base)/upload"])
      #expect(log.contains("HTTP/1.1 100 Continue"))
      let json = try JSONSerialization.jsonObject(with: Data(upload.utf8)) as? [String: String]
      #expect(json == ["size": "3145728", "sha256": Hex.encode(Digest.hash(.sha256, body))])
    }
  }
}

/// Runs curl and returns (stdout, stderr).
func runCurl(_ arguments: [String]) throws -> (String, String) {
  let result = try Subprocess.run("/usr/bin/curl", ["--max-time", "60"] + arguments, timeout: 120)
  return (result.stdout, result.stderr)
}
