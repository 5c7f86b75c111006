import Foundation
import LarderTestSupport
import Testing

/// `larder serve` as a real process: policy required, port 0, /healthz, clean stop on SIGTERM.
@Suite struct ServeCommandTests {
  @Test func serveWithoutPolicyIsBadUsageNamingBothOptions() throws {
    let box = try Sandbox()
    let result = try box.larder("serve", "--port", "0")
    #expect(result.status == 2, "\(result)")
    let line = result.stderrLines.first ?? ""
    #expect(line.hasPrefix("larder: error: no access policy"))
    #expect(line.contains("--rules FILE"))
    #expect(line.contains("--allow-all"))
    #expect(result.stderrLines.dropFirst().first?.hasPrefix("usage: larder serve") == true)
    #expect(result.stdout == "")
    let both = try box.larder("serve", "--allow-all", "--rules", "x.rules")
    #expect(both.status == 2)
    #expect(both.stderrLines.first == "larder: error: --rules and --allow-all exclude each other")
  }

  /// Sends one HTTP/1.1 request on a fresh connection and returns the whole answer (the server closes).
  static func request(port: UInt16, _ text: String) throws -> String {
    let connection = try RawConnection(port: port)
    defer { connection.close() }
    try connection.send(Array(text.utf8))
    return String(decoding: try connection.readToEnd(), as: UTF8.self)
  }

  @Test func serveOnPortZeroAnswersHealthzAndStopsOnSIGTERM() throws {
    let box = try Sandbox()
    let out = box.path("serve.out")
    let err = box.path("serve.err")
    let pid = try CLI.spawn(
      try CLI.binary(), ["serve", "--data", box.dataPath, "--allow-all", "--port", "0", "--threads", "2"],
      stdoutPath: out, stderrPath: err)
    var reaped = false
    defer {
      if !reaped {
        kill(pid, SIGKILL)
        _ = try? CLI.wait(pid, timeout: 30)
      }
    }
    // Wait (generously) for the one line on stdout.
    let deadline = Date().addingTimeInterval(60)
    var line = ""
    while Date() < deadline {
      let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
      if text.hasSuffix("\n") {
        line = text
        break
      }
      var status: Int32 = 0
      if waitpid(pid, &status, WNOHANG) == pid {
        reaped = true
        Issue.record(
          "serve exited early (status \(status)): \((try? String(contentsOfFile: err, encoding: .utf8)) ?? "")"
        )
        return
      }
      usleep(20_000)
    }
    let prefix = "listening on http://127.0.0.1:"
    #expect(line.hasPrefix(prefix), "stdout: \(line.debugDescription)")
    let port = try #require(
      UInt16(line.dropFirst(prefix.count).dropLast()), "no port in \(line.debugDescription)")
    #expect(port > 0)

    let health = try Self.request(
      port: port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    #expect(health.hasPrefix("HTTP/1.1 200"), "\(health)")

    // The server and the CLI share the directory: a put from the CLI is served at once.
    try box.put("bkt/hello.txt", Array("hello from the CLI\n".utf8))
    let media = try Self.request(
      port: port, "GET /v0/b/bkt/o/hello.txt?alt=media HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    #expect(media.hasPrefix("HTTP/1.1 200"), "\(media)")
    #expect(media.hasSuffix("\r\n\r\nhello from the CLI\n"), "\(media)")

    #expect(kill(pid, SIGTERM) == 0)
    let status = try CLI.wait(pid, timeout: 45)
    reaped = true
    #expect(status == 0)
    let stdout = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
    #expect(stdout == line, "exactly one line on stdout: \(stdout.debugDescription)")
    let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
    #expect(stderr.contains("larder: stopped\n"), "\(stderr)")
    #expect(stderr.contains("WARNING: --allow-all"))
    // The catalog was checkpointed on the way out: the write-ahead log is empty.
    var st = stat()
    let wal = "\(box.dataPath)/larder.sqlite-wal"
    #expect(stat(wal, &st) != 0 || st.st_size == 0, "WAL left with \(st.st_size) bytes")
  }
}
