import Foundation
import LarderHTTP
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
