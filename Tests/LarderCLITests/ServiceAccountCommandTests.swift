import Foundation
import LarderTestSupport
import Testing

/// `larder service-account create`, `list` and `revoke`.
@Suite struct ServiceAccountCommandTests {
  /// `larder service-account VERB --data DATA ARGS…` (a verb under a group comes before options).
  func larder(_ box: Sandbox, _ verb: String, _ arguments: String..., environment: [String: String] = [:])
    throws
    -> RunResult
  {
    try CLI.larder(["service-account", verb, "--data", box.dataPath] + arguments, environment: environment)
  }

  @Test func createWritesAGoogleKeyFileListAndRevoke() throws {
    let box = try Sandbox()
    let file = box.root.appendingPathComponent("backend.json")
    let made = try larder(
      box, "create", "backend", "--public-url", "https://files.example.com/", "--output", file.path)
    #expect(made.status == 0, "\(made)")
    let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
    #expect((attributes[.posixPermissions] as? Int) == 0o600)
    let key = try #require(
      try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: String])
    #expect(key["type"] == "service_account")
    #expect(key["client_email"] == "backend@larder.iam.larder")
    #expect(key["token_uri"] == "https://files.example.com/token")
    #expect(key["project_id"] == "larder")
    #expect(key["private_key"]?.hasPrefix("-----BEGIN PRIVATE KEY-----\n") == true)
    let kid = try #require(key["private_key_id"])
    #expect(kid.count == 40)
    // openssl reads the private key, and it is 2048-bit RSA.
    let openssl = try OpenSSLTool(directory: box.root.appendingPathComponent("openssl"))
    let text = String(
      decoding: try openssl.run(["pkey", "-noout", "-text"], input: Array(key["private_key"]!.utf8)),
      as: UTF8.self)
    #expect(text.contains("2048 bit"))
    // Never over an existing file.
    let again = try larder(box, "create", "backend", "--output", file.path)
    #expect(again.status == 1)
    // The default URL (LARDER_PUBLIC_URL unset), and the environment's.
    let worker = box.path("worker.json")
    let printed = try larder(box, "create", "worker", "--output", worker, environment: ["LARDER_PUBLIC_URL": ""])
    #expect(printed.stdout == "", "\(printed.stdout)")
    #expect(try String(contentsOfFile: worker, encoding: .utf8).contains("\"token_uri\" : \"http://127.0.0.1:8080/token\""))
    let job = box.path("job.json")
    let fromEnvironment = try larder(
      box, "create", "job", "--output", job, environment: ["LARDER_PUBLIC_URL": "http://node:9000"])
    #expect(fromEnvironment.status == 0)
    #expect(try String(contentsOfFile: job, encoding: .utf8).contains("http://node:9000/token"))
    #expect(try larder(box, "create", "Bad_Name").status == 2)

    let list = try larder(box, "list")
    #expect(list.status == 0)
    #expect(list.stdout.split(separator: "\n").count == 3)
    #expect(list.stdout.contains(kid))
    #expect(!list.stdout.contains("PRIVATE"))
    let revoked = try larder(box, "revoke", "backend@larder.iam.larder")
    #expect(revoked.status == 0)
    #expect(revoked.stdout.contains(kid))
    #expect(try larder(box, "list").stdout.split(separator: "\n").count == 2)
    #expect(try larder(box, "revoke", "backend").status == 1)
  }
}
