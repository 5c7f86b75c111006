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
    let work = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-sec-hup-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: work) }
    let rulesFile = work.appendingPathComponent("storage.rules")
    try Data(Self.rules("true").utf8).write(to: rulesFile)
    let server = try ServeProcess(
      ["--rules", rulesFile.path, "--data", work.appendingPathComponent("data").path], in: work)
    func status() throws -> Int { try server.status(of: .get("/v0/b/app/o/x%2Fa")) }
    #expect(try status() == 404)

    try Data(Self.rules("false").utf8).write(to: rulesFile)
    #expect(server.signal(SIGHUP))
    try server.poll("the denying rules") { try status() == 403 }

    try Data(Self.broken.utf8).write(to: rulesFile)
    #expect(server.signal(SIGHUP))
    try server.poll("the reload failure note") {
      server.stderr.contains("rules reload failed, keeping the previous rules")
    }
    #expect(server.stderr.contains("\(rulesFile.path):4:"))
    #expect(try status() == 403)

    try Data(Self.rules("true").utf8).write(to: rulesFile)
    #expect(server.signal(SIGHUP))
    try server.poll("the allowing rules") { try status() == 404 }

    let wstatus = try #require(server.stop(), "SIGTERM")
    #expect(wstatus & 0x7f == 0)  // exited by itself, not killed by the signal
  }
}
