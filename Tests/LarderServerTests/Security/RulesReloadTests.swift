import Foundation
import LarderServer
import LarderTestSupport
import Testing

/// Rules changes: `RulesPolicy.reload()` in process, and SIGHUP to a real `larder serve`.
@Suite struct RulesReloadTests {
  static func rules(_ condition: String) -> String {
    """
    rules_version = '2';
    service firebase.storage {
      match /b/{bucket}/o {
        match /x/{file} { allow get: if \(condition); }
      }
    }
    """
  }

  static let broken =
    "rules_version = '2';\nservice firebase.storage {\n  match /b/{bucket}/o {\n    allow get: if (;\n"

  func get(_ policy: RulesPolicy, uid: String? = nil) -> Bool {
    policy.decide(
      AccessRequest(operation: .get, bucket: "app", name: "x/a", identity: uid.map { Identity(uid: $0) })
    ).allowed
  }

  @Test func reloadChangesDecisionsAndABrokenFileKeepsTheOldRules() throws {
    let file = try temporaryRulesFile(Self.rules("true"))
    defer { try? FileManager.default.removeItem(at: file) }
    let policy = try RulesPolicy(file: file)
    #expect(get(policy))

    try Data(Self.rules("request.auth.uid == 'alice'").utf8).write(to: file)
    #expect(get(policy))  // not until reloaded
    #expect(policy.reload() == nil)
    #expect(!get(policy))
    #expect(get(policy, uid: "alice"))
    #expect(!get(policy, uid: "bob"))

    try Data(Self.broken.utf8).write(to: file)
    let diagnostics = try #require(policy.reload())
    #expect(diagnostics.contains("\(file.path):4:"))
    #expect(!get(policy))
    #expect(get(policy, uid: "alice"))

    try FileManager.default.removeItem(at: file)
    #expect(policy.reload() != nil)
    #expect(get(policy, uid: "alice"))
  }

  @Test func reloadTakesEffectOnALiveService() throws {
    let file = try temporaryRulesFile(Self.rules("true"))
    defer { try? FileManager.default.removeItem(at: file) }
    try withRulesService(rules: file) { s in
      #expect(try s.send(.get("/v0/b/app/o/x%2Fa")).status == 404)
      try Data(Self.rules("false").utf8).write(to: file)
      #expect(s.service.rules?.reload() == nil)
      #expect(try s.send(.get("/v0/b/app/o/x%2Fa")).status == 403)
      try Data(Self.broken.utf8).write(to: file)
      #expect(s.service.rules?.reload() != nil)
      #expect(try s.send(.get("/v0/b/app/o/x%2Fa")).status == 403)
    }
  }

  /// The real binary: `larder serve --rules FILE --port 0`, then SIGHUP after each change.
  @Test func sighupReloadsTheRulesOfARunningServer() throws {
    // The `larder` built with this test bundle (any --scratch-path), else the package's `.build/debug`.
    let besideTests = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
      .appendingPathComponent("larder").path
    let binary =
      FileManager.default.isExecutableFile(atPath: besideTests)
      ? besideTests : securityPackageRoot.appendingPathComponent(".build/debug/larder").path
    try #require(
      FileManager.default.isExecutableFile(atPath: binary),
      "\(binary) is missing: build it first (`swift build` or `make test`)")
    let work = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-sec-hup-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: work) }
    let rulesFile = work.appendingPathComponent("storage.rules")
    try Data(Self.rules("true").utf8).write(to: rulesFile)
    let out = work.appendingPathComponent("stdout").path
    let err = work.appendingPathComponent("stderr").path

    let arguments = [
      "serve", "--rules", rulesFile.path, "--port", "0", "--host", "127.0.0.1", "--data",
      work.appendingPathComponent("data").path,
    ]
    let pid = try Subprocess.spawn(binary, arguments, stdoutPath: out, stderrPath: err)
    try #require(pid > 0)
    var exited = false
    defer {
      if !exited {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
      }
    }
    func text(_ path: String) -> String {
      String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
    }
    /// Polls up to 30 s (a loaded machine is slow, a healthy one answers at once).
    func poll(_ what: String, _ condition: () throws -> Bool) throws {
      for _ in 0..<300 {
        if try condition() { return }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid {
          exited = true
          Issue.record(
            "\(binary) exited (status \(status)) while waiting for \(what); stdout: \(text(out).prefix(500)) stderr: \(text(err).suffix(2000))"
          )
          throw WireFailure.unexpected("server exited")
        }
        usleep(100_000)
      }
      Issue.record("timed out waiting for \(what); stderr: \(text(err).suffix(2000))")
      throw WireFailure.unexpected("timeout: \(what)")
    }

    var port = 0
    try poll("the listening line") {
      guard
        let line = text(out).split(separator: "\n").first(where: {
          $0.hasPrefix("listening on http://127.0.0.1:")
        }),
        let p = Int(line.split(separator: ":").last ?? "")
      else { return false }
      port = p
      return true
    }
    func status() throws -> Int {
      let c = try WireConnection(port: port)
      try c.send(WireRequest.get("/v0/b/app/o/x%2Fa").bytes(closing: true))
      return try c.readResponse().status
    }
    #expect(try status() == 404)

    try Data(Self.rules("false").utf8).write(to: rulesFile)
    #expect(kill(pid, SIGHUP) == 0)
    try poll("the denying rules") { try status() == 403 }

    try Data(Self.broken.utf8).write(to: rulesFile)
    #expect(kill(pid, SIGHUP) == 0)
    try poll("the reload failure note") {
      text(err).contains("rules reload failed, keeping the previous rules")
    }
    #expect(text(err).contains("\(rulesFile.path):4:"))
    #expect(try status() == 403)

    try Data(Self.rules("true").utf8).write(to: rulesFile)
    #expect(kill(pid, SIGHUP) == 0)
    try poll("the allowing rules") { try status() == 404 }

    #expect(kill(pid, SIGTERM) == 0)
    var wstatus: Int32 = 0
    while waitpid(pid, &wstatus, 0) < 0 && errno == EINTR {}
    exited = true
    #expect(wstatus & 0x7f == 0)  // exited by itself, not killed by the signal
  }
}
