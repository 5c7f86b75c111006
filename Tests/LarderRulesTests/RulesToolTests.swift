import Foundation
import LarderRules
import Testing

/// The helpers behind `larder rules check` and `larder rules eval`.
struct RulesToolTests {
  static func temporaryFile(_ contents: String) throws -> String {
    let path = FileManager.default.temporaryDirectory
      .appendingPathComponent("rules-\(UUID().uuidString).rules").path
    try contents.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  @Test func checkAcceptsTheExample() {
    let path = ExampleRulesTests.exampleURL.path
    let result = RulesTool.check(path: path)
    #expect(result.ok == true)
    #expect(result.output == "\(path): ok")
  }

  @Test func checkReportsDiagnostics() throws {
    let path = try Self.temporaryFile(
      "service firebase.storage {\n  match /b/{b}/o {\n    allow nope;\n  }\n}\n")
    defer { try? FileManager.default.removeItem(atPath: path) }
    let result = RulesTool.check(path: path)
    #expect(result.ok == false)
    #expect(
      result.output
        == "\(path):3:11: error: unknown method 'nope' (expected read, write, get, list, create, update or delete)\n        allow nope;\n              ^"
    )
  }

  @Test func checkReportsAMissingFile() {
    let result = RulesTool.check(path: "/nonexistent/storage.rules")
    #expect(result.ok == false)
    #expect(result.output.hasPrefix("/nonexistent/storage.rules: error: cannot read file"))
  }

  @Test func evalWriteAsOwnerAllowsEachWriteOperation() {
    let path = ExampleRulesTests.exampleURL.path
    let result = RulesTool.eval(
      path: path, operation: "write", requestPath: "/b/dev/o/users/u1/a.txt", uid: "u1")
    #expect(result.exitCode == 0)
    #expect(
      result.output == """
        create: ALLOW - allowed by \(path):27:7
        update: ALLOW - allowed by \(path):27:7
        delete: ALLOW - allowed by \(path):27:7
        """)
  }

  @Test func evalDeniesAnotherUserAndOversizedImages() {
    let path = ExampleRulesTests.exampleURL.path
    let other = RulesTool.eval(
      path: path, operation: "get", requestPath: "/b/dev/o/users/u1/a.txt", uid: "u2")
    #expect(other.exitCode == 1)
    #expect(
      other.output.hasPrefix("get: DENY - denied 'get' on /b/dev/o/users/u1/a.txt: \(path):27:7: false"))
    let image = RulesTool.eval(
      path: path, operation: "create", requestPath: "/b/dev/o/images/u1/big.png", uid: "u1", size: 6 << 20,
      contentType: "image/png")
    #expect(image.exitCode == 1)
    let small = RulesTool.eval(
      path: path, operation: "create", requestPath: "/b/dev/o/images/u1/big.png", uid: "u1", size: 1 << 20,
      contentType: "image/png")
    #expect(small.exitCode == 0)
    #expect(small.output == "create: ALLOW - allowed by \(path):47:7")
  }

  @Test func evalRejectsBadInput() {
    let path = ExampleRulesTests.exampleURL.path
    #expect(RulesTool.eval(path: path, operation: "destroy", requestPath: "/b/x/o/y").exitCode == 2)
    let badPath = RulesTool.eval(path: path, operation: "get", requestPath: "users/u1/a.txt")
    #expect(badPath.exitCode == 2)
    #expect(badPath.output == "error: path must look like /b/BUCKET/o/OBJECT, got 'users/u1/a.txt'")
    #expect(RulesTool.eval(path: "/nonexistent", operation: "get", requestPath: "/b/x/o/y").exitCode == 2)
    // The object part starts at exactly `/o/` (or is `/o`): `/opublic/x` is not the object `public/x`.
    for bad in ["/b/app/opublic/x", "/b/app/o.x", "/b/app/oo/x", "/b/app/x/o/y", "/b/app/"] {
      let result = RulesTool.eval(path: path, operation: "get", requestPath: bad)
      #expect(result.exitCode == 2, "\(bad)")
      #expect(result.output == "error: path must look like /b/BUCKET/o/OBJECT, got '\(bad)'")
    }
    let publicFile = RulesTool.eval(path: path, operation: "get", requestPath: "/b/app/o/public/x")
    #expect(publicFile.exitCode == 0)
  }

  @Test func evalOfTheBareObjectPrefixHasAnEmptyName() throws {
    let path = try Self.temporaryFile(
      "rules_version = '2';\nservice firebase.storage {\n  match /b/{b}/o/{all=**} {\n    allow list: if all.size() == 0;\n  }\n}\n")
    defer { try? FileManager.default.removeItem(atPath: path) }
    for bare in ["/b/app/o", "/b/app/o/"] {
      let result = RulesTool.eval(path: path, operation: "list", requestPath: bare)
      #expect(result.exitCode == 0, "\(bare): \(result.output)")
      #expect(result.output == "list: ALLOW - allowed by \(path):4:5")
    }
  }
}
