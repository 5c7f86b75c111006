import Foundation
@testable import LarderHTTP
import Testing

/// The file access log is buffered and written by its own thread: every line still arrives,
/// whole and unchanged, and all of them are in the file once the server has stopped.
@Suite struct AccessLogFileTests {
  static func scratchFile() throws -> (URL, URL) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-accesslog-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return (directory, directory.appendingPathComponent("access.log"))
  }

  @Test func lineTextIsUnchanged() {
    let entry = AccessLogEntry(
      time: 1_764_525_599.1234, requestID: "req-1", method: "GET", path: "/v0/b/app/o/a%2Fb", route: "objects.get",
      status: 200, bytesIn: 0, bytesOut: 4096, durationMilliseconds: 0.0625, remote: "127.0.0.1", outcome: "ok")
    #expect(
      entry.json
        == #"{"time":"2025-11-30T17:59:59.123Z","request_id":"req-1","method":"GET","path":"/v0/b/app/o/a%2Fb","route":"objects.get","status":200,"bytes_in":0,"bytes_out":4096,"duration_ms":0.062,"remote":"127.0.0.1","outcome":"ok"}"#
    )
    // The duration reads exactly as Foundation's formatter printed it before.
    for ms in [0, 0.0005, 0.0015, 1.5, 12.3456, 999.9995, 123_456.789, 1e12] {
      var e = entry
      e.durationMilliseconds = ms
      #expect(e.json.contains(#""duration_ms":\#(String(format: "%.3f", ms)),"#), "\(ms)")
    }
  }

  @Test func linesBuiltAsBytesReadAsTheFormattedTextDid() {
    // The reference: the same fields through gmtime_r, vsnprintf and scalar-by-scalar quoting.
    func reference(_ e: AccessLogEntry) -> String {
      "{\"time\":\"\(AccessLogEntry.iso8601(e.time))\",\"request_id\":" + AccessLogEntry.quote(e.requestID)
        + ",\"method\":" + AccessLogEntry.quote(e.method) + ",\"path\":" + AccessLogEntry.quote(e.path)
        + ",\"route\":" + AccessLogEntry.quote(e.route)
        + ",\"status\":\(e.status),\"bytes_in\":\(e.bytesIn),\"bytes_out\":\(e.bytesOut)"
        + ",\"duration_ms\":" + AccessLogEntry.printf("%.3f", e.durationMilliseconds)
        + ",\"remote\":" + AccessLogEntry.quote(e.remote) + ",\"outcome\":" + AccessLogEntry.quote(e.outcome) + "}"
    }
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    func next() -> UInt64 {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return state
    }
    let times: [Double] =
      [0, 0.9995, 59.9999, 951_782_400, 951_868_799.5, 4_107_542_399.999, 253_402_300_799.5, 253_402_300_800, -1.5]
      + (0..<2000).map { _ in Double(next() % 253_402_300_800_000) / 1000 }
    let durations: [Double] =
      [0, 5e-324, 0.000_499_9, 0.0005, 0.0625, 0.1875, 0.0015, 999.9995, 1e9 - 0.0005, 1e9, 1e12, -1, .nan, .infinity]
      + (0..<2000).map { _ in Double(next() % 10_000_000) / 1_000_000 * Double(1 << (next() % 20)) }
    let texts = ["plain", "q\"b\\s", "ctl\u{01}\u{1f}\u{7f}\t\r\n", "é/日本/🙂", "", "e\u{301}\r\n"]
    for (i, time) in times.enumerated() {
      let e = AccessLogEntry(
        time: time, requestID: texts[i % texts.count], method: "GET", path: texts[(i + 1) % texts.count],
        route: "objects.download", status: [200, 206, 304, 404, 0][i % 5], bytesIn: Int64(i) - 3,
        bytesOut: Int64(bitPattern: next() >> 1), durationMilliseconds: durations[i % durations.count],
        remote: texts[(i + 2) % texts.count], outcome: "ok")
      #expect(e.json == reference(e), "\(time) \(e.durationMilliseconds)")
    }
  }

  @Test func everyLineFromManyThreadsReachesTheFileWholeAfterFlush() throws {
    let (directory, file) = try Self.scratchFile()
    defer { try? FileManager.default.removeItem(at: directory) }
    let log = try AccessLog(.file(file.path))
    @Sendable func entry(_ i: Int) -> AccessLogEntry {
      AccessLogEntry(
        time: 1_700_000_000 + Double(i), requestID: "r\(i)", method: "GET", path: "/p/\(i)", route: "x", status: 200,
        bytesIn: 0, bytesOut: Int64(i), durationMilliseconds: 1, remote: "127.0.0.1", outcome: "ok")
    }
    // 4 × 5 000 lines of ~200 bytes: several times the wake-up size, so the writer thread runs.
    DispatchQueue.concurrentPerform(iterations: 4) { t in
      for i in 0..<5_000 { log.record(entry(t * 5_000 + i)) }
    }
    log.flush()
    let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
    #expect(lines.count == 20_001)
    #expect(lines.last == "")
    #expect(Set(lines.dropLast().map(String.init)) == Set((0..<20_000).map { entry($0).json }))
  }

  @Test func linesOfALiveServerAreInTheFileWhenItStops() throws {
    let (directory, file) = try Self.scratchFile()
    defer { try? FileManager.default.removeItem(at: directory) }
    try withServer({ $0.accessLog = .file(file.path) }, handler: testRouter()) { server in
      let c = try WireConnection(port: server.boundPort)
      for i in 0..<3 {
        try c.send("GET /echo/\(i)?q=secret HTTP/1.1\r\nHost: x\r\nX-Request-Id: req-\(i)\r\n\r\n")
        #expect(try c.readResponse().status == 200)
      }
      server.shutdown(timeout: .seconds(10))
      let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
      #expect(lines.count == 3)
      for (i, line) in lines.enumerated() {
        let json = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(json["request_id"] as? String == "req-\(i)")
        #expect(json["path"] as? String == "/echo/\(i)")
        #expect(json["status"] as? Int == 200)
        #expect(json["outcome"] as? String == "ok")
      }
    }
  }
}
