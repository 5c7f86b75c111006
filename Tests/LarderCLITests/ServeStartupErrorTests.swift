import Foundation
import Testing

/// `larder serve` that cannot start: a non-zero exit with a message that names the problem, and
/// never a "listening on" line.
@Suite struct ServeStartupErrorTests {
  @Test func brokenRulesFileIsReportedWithItsPosition() throws {
    let box = try Sandbox()
    let rules = try box.write(
      "broken.rules",
      Array("service firebase.storage {\n  match /b/{bucket}/o {\n    allow read: if request.auth.uid == ;\n  }\n}\n".utf8))
    let result = try box.larder("serve", "--rules", rules, "--port", "0")
    #expect(result.status != 0, "\(result)")
    #expect(result.status != 132 && result.status != 134, "crashed: \(result)")
    #expect(result.stderr.contains("broken.rules:3:"), "\(result)")
    #expect(!result.stdout.contains("listening on"), "\(result)")
  }

  @Test func missingRulesFileIsAnError() throws {
    let box = try Sandbox()
    let result = try box.larder("serve", "--rules", "/nonexistent/storage.rules", "--port", "0")
    #expect(result.status != 0, "\(result)")
    #expect(result.status != 132 && result.status != 134, "crashed: \(result)")
    #expect(result.stderr.contains("/nonexistent/storage.rules"), "\(result)")
    #expect(!result.stdout.contains("listening on"), "\(result)")
  }

  @Test(arguments: [
    ("not a key\n", "not a JWKS document (a JSON object with a \"keys\" array)"),
    ("-----BEGIN PUBLIC KEY-----\ngarbage\n-----END PUBLIC KEY-----\n",
     "invalid key: no PEM \"PUBLIC KEY\" or \"CERTIFICATE\" block could be read"),
  ])
  func garbagePublicKeyIsAnError(_ contents: String, _ reason: String) throws {
    let box = try Sandbox()
    let pem = try box.write("garbage.pem", Array(contents.utf8))
    let result = try box.larder("serve", "--allow-all", "--public-key", pem, "--port", "0")
    #expect(result.status == 1, "\(result)")
    #expect(result.stderrLines.first == "larder: error: key file \(pem): \(reason)", "\(result)")
    #expect(!result.stdout.contains("listening on"), "\(result)")
  }
}
