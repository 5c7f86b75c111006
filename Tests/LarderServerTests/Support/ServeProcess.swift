import Foundation
import LarderTestSupport
import Testing

/// `larder serve` as a real process, for what only the process shows (SIGHUP reloads): the
/// binary built with this test bundle (any `--scratch-path`), else the package's `.build/debug`.
/// Started on `--port 0`; ``port`` is read from its `listening on` line. Killed (SIGTERM) when
/// released unless ``stop()`` ended it.
///
/// ```swift
/// let server = try ServeProcess(["--rules", rules.path, "--data", data.path], in: work)
/// #expect(server.signal(SIGHUP))
/// try server.poll("the reload note") { server.stderr.contains("rules reloaded") }
/// ```
final class ServeProcess {
  let binary: String
  let pid: pid_t
  let stdoutPath: String
  let stderrPath: String
  private(set) var port = 0
  private var exited = false

  /// Spawns `larder serve --port 0 --host 127.0.0.1` plus `arguments`, writing its output in
  /// `work`, and waits for its listening line.
  init(_ arguments: [String], in work: URL) throws {
    binary = try Self.larderBinary()
    stdoutPath = work.appendingPathComponent("stdout").path
    stderrPath = work.appendingPathComponent("stderr").path
    pid = try Subprocess.spawn(
      binary, ["serve", "--port", "0", "--host", "127.0.0.1"] + arguments, stdoutPath: stdoutPath,
      stderrPath: stderrPath)
    try #require(pid > 0)
    var port = 0
    try poll("the listening line") {
      guard
        let line = stdout.split(separator: "\n").first(where: { $0.hasPrefix("listening on http://127.0.0.1:") }),
        let p = Int(line.split(separator: ":").last ?? "")
      else { return false }
      port = p
      return true
    }
    self.port = port
  }

  deinit {
    if !exited {
      kill(pid, SIGTERM)
      var status: Int32 = 0
      while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
  }

  /// The `larder` binary built with this test bundle, else the package's `.build/debug` one.
  static func larderBinary() throws -> String {
    let besideTests = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
      .appendingPathComponent("larder").path
    let binary =
      FileManager.default.isExecutableFile(atPath: besideTests)
      ? besideTests : securityPackageRoot.appendingPathComponent(".build/debug/larder").path
    try #require(
      FileManager.default.isExecutableFile(atPath: binary),
      "\(binary) is missing: build it first (`swift build` or `make test`)")
    return binary
  }

  var stdout: String { Self.text(stdoutPath) }
  var stderr: String { Self.text(stderrPath) }

  private static func text(_ path: String) -> String {
    String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
  }

  /// Sends `signal`; true when it was delivered.
  func signal(_ signal: Int32) -> Bool { kill(pid, signal) == 0 }

  /// Polls `condition` up to 30 s (a loaded machine is slow, a healthy one answers at once);
  /// records an issue and throws when the server exits or time runs out.
  func poll(_ what: String, _ condition: () throws -> Bool) throws {
    for _ in 0..<300 {
      if try condition() { return }
      var status: Int32 = 0
      if waitpid(pid, &status, WNOHANG) == pid {
        exited = true
        Issue.record(
          "\(binary) exited (status \(status)) while waiting for \(what); stdout: \(stdout.prefix(500)) stderr: \(stderr.suffix(2000))"
        )
        throw WireFailure.unexpected("server exited")
      }
      usleep(100_000)
    }
    Issue.record("timed out waiting for \(what); stderr: \(stderr.suffix(2000))")
    throw WireFailure.unexpected("timeout: \(what)")
  }

  /// One GET on a fresh connection; the answer's status.
  func status(of request: WireRequest) throws -> Int {
    let c = try WireConnection(port: port)
    try c.send(request.bytes(closing: true))
    return try c.readResponse().status
  }

  /// SIGTERM, then waits for the process; its wait status, or nil when the signal failed.
  func stop() -> Int32? {
    guard kill(pid, SIGTERM) == 0 else { return nil }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    exited = true
    return status
  }
}
