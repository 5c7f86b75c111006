import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// `larder token`, `larder rules check`, `larder rules eval`.
@Suite struct TokenAndRulesTests {
  static func base64URLDecode(_ text: Substring) -> Data? {
    var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while s.count % 4 != 0 { s += "=" }
    return Data(base64Encoded: s)
  }

  @Test func tokenCarriesUidClaimsAndExpiry() throws {
    let box = try Sandbox()
    let before = Date().timeIntervalSince1970
    let result = try box.larder(
      "token", "--uid", "u1", "--claim", "admin=true", "--claim", "team=blue", "--ttl", "1h")
    let after = Date().timeIntervalSince1970
    #expect(result.status == 0, "\(result)")
    #expect(result.stdoutLines.count == 1)
    let token = result.stdoutLines.first ?? ""
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    #expect(parts.count == 3)
    #expect(
      parts.allSatisfy {
        !$0.isEmpty && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
      })
    let header = try #require(Self.base64URLDecode(parts[0]))
    let headerJSON = try #require(try JSONSerialization.jsonObject(with: header) as? [String: Any])
    #expect(headerJSON["alg"] as? String == "HS256")
    let payload = try #require(Self.base64URLDecode(parts[1]))
    let claims = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
    #expect(claims["sub"] as? String == "u1")
    #expect(claims["admin"] as? Bool == true)
    // A JSON boolean, not the string "true" or the number 1.
    let compact = String(decoding: payload, as: UTF8.self).filter { !$0.isWhitespace }
    #expect(compact.contains("\"admin\":true"), "\(compact)")
    #expect(claims["team"] as? String == "blue")
    let exp = try #require(claims["exp"] as? Double)
    #expect(exp >= (before + 3600).rounded(.down) - 1 && exp <= after + 3600 + 1, "exp \(exp)")
    #expect(Self.base64URLDecode(parts[2])?.count == 32)  // an HMAC-SHA256

    // The secret is the catalog's token_secret row, made once and reused; no DATA/secret file.
    let secret = try #require(try Self.catalogSecret(box))
    #expect(secret.count == 32)
    #expect(!FileManager.default.fileExists(atPath: box.data.appendingPathComponent("secret").path))
    // The signature is HMAC-SHA256 of header.payload under those 32 bytes, by openssl's reckoning.
    let openssl = try OpenSSLTool(directory: box.root.appendingPathComponent("openssl"))
    let expected = try openssl.signHS256(String(parts[0]) + "." + String(parts[1]), secret: secret)
    #expect(Self.base64URLDecode(parts[2]).map(Array.init) == expected)
    _ = try box.larder("token", "--uid", "u2")
    #expect(try Self.catalogSecret(box) == secret)
    // A short TTL and the default one.
    let short = try box.larder("token", "--uid", "u2", "--ttl", "30s")
    let shortClaims =
      try JSONSerialization.jsonObject(
        with: #require(Self.base64URLDecode(short.stdout.split(separator: ".")[1]))) as? [String: Any]
    let shortExp = shortClaims?["exp"] as? Double ?? 0
    #expect(shortExp > Date().timeIntervalSince1970 - 60 && shortExp < Date().timeIntervalSince1970 + 31)
  }

  /// The `token_secret` row of the sandbox's catalog, nil when there is none.
  static func catalogSecret(_ box: Sandbox) throws -> [UInt8]? {
    try TestStore.open(at: box.data).catalog.read { db in
      try db.row("SELECT value FROM settings WHERE key = 'token_secret'")?.bytes("value")
    }
  }

  @Test func tokenAdoptsALegacySecretFileOnce() throws {
    // A data directory from before the key moved to the catalog: its DATA/secret signs the
    // tokens, so tokens issued then still verify; the row, once made, wins over the file.
    let box = try Sandbox()
    try FileManager.default.createDirectory(at: box.data, withIntermediateDirectories: true)
    let legacy = (0..<32).map { UInt8($0 * 7 + 3) }
    let file = box.data.appendingPathComponent("secret")
    #expect(FileManager.default.createFile(atPath: file.path, contents: Data(legacy), attributes: [.posixPermissions: 0o600]))
    let result = try box.larder("token", "--uid", "u1")
    #expect(result.status == 0, "\(result)")
    let parts = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ".")
    try #require(parts.count == 3)
    let openssl = try OpenSSLTool(directory: box.root.appendingPathComponent("openssl"))
    let expected = try openssl.signHS256(String(parts[0]) + "." + String(parts[1]), secret: legacy)
    #expect(Self.base64URLDecode(parts[2]).map(Array.init) == expected)
    #expect(try Self.catalogSecret(box) == legacy)
    // The file is left alone, and no longer read: replacing it changes nothing.
    #expect(try Data(contentsOf: file) == Data(legacy))
    try Data(repeating: 0xAA, count: 32).write(to: file)
    let again = try box.larder("token", "--uid", "u1", "--ttl", "2h")
    #expect(again.status == 0, "\(again)")
    let againParts = again.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ".")
    try #require(againParts.count == 3)
    let againExpected = try openssl.signHS256(String(againParts[0]) + "." + String(againParts[1]), secret: legacy)
    #expect(Self.base64URLDecode(againParts[2]).map(Array.init) == againExpected)
  }

  static func payload(_ token: String) throws -> [String: Any] {
    let parts = token.split(separator: ".")
    try #require(parts.count == 3, "\(token)")
    let data = try #require(Self.base64URLDecode(parts[1]))
    return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
  }

  @Test func claimValuesAreOneJSONValueOrAString() throws {
    let box = try Sandbox()
    let result = try box.larder(
      "token", "--uid", "u1", "--claim", #"a=1,"b":2"#, "--claim", #"c=1,"v":2"#, "--claim", "n=42",
      "--claim", #"l=["x",1.5]"#, "--claim", #"o={"k":null}"#, "--claim", "s=plain", "--claim", "e=")
    #expect(result.status == 0, "\(result)")
    let claims = try Self.payload(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    #expect(claims["a"] as? String == #"1,"b":2"#)
    #expect(claims["b"] == nil)
    #expect(claims["c"] as? String == #"1,"v":2"#)
    #expect((claims["n"] as? NSNumber)?.int64Value == 42)
    let list = try #require(claims["l"] as? [Any])
    #expect(list.count == 2)
    #expect(list.first as? String == "x")
    #expect((list.last as? NSNumber)?.doubleValue == 1.5)
    #expect((claims["o"] as? [String: Any])?["k"] is NSNull)
    #expect(claims["s"] as? String == "plain")
    #expect(claims["e"] as? String == "")
    #expect(Set(claims.keys) == ["sub", "iat", "exp", "a", "c", "n", "l", "o", "s", "e"])
  }

  @Test func hundredYearTTLIsTheLongest() throws {
    let box = try Sandbox()
    let result = try box.larder("token", "--uid", "u1", "--ttl", "36500d")
    #expect(result.status == 0, "\(result)")
    let claims = try Self.payload(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    let iat = try #require((claims["iat"] as? NSNumber)?.int64Value)
    #expect((claims["exp"] as? NSNumber)?.int64Value == iat + 36_500 * 86_400)
  }

  static var example: String { CLI.packageRoot.appendingPathComponent("storage.rules.example").path }

  @Test func exampleRulesCheckClean() throws {
    let result = try CLI.larder(["rules", "check", Self.example])
    #expect(result.status == 0, "\(result)")
    #expect(result.stderr == "")
  }

  @Test func brokenRulesReportFileLineColumn() throws {
    let box = try Sandbox()
    let file = try box.write(
      "broken.rules",
      Array(
        """
        rules_version = '2';
        service firebase.storage {
          match /b/{bucket}/o {
            allow read: if request.auth.uid == ;
          }
        }

        """.utf8))
    let result = try CLI.larder(["rules", "check", file])
    #expect(result.status == 1, "\(result)")
    #expect(result.stdout == "")
    #expect(result.stderr.contains("\(file):4:"), "\(result)")
    let line = result.stderrLines.first { $0.hasPrefix("\(file):4:") } ?? ""
    // file:line:col: message
    let fields = line.dropFirst(file.count + 1).split(separator: ":", maxSplits: 2)
    #expect(fields.count == 3 && Int(fields[0]) == 4 && (Int(fields[1]) ?? 0) > 0, "\(line)")

    let missing = try CLI.larder(["rules", "check", box.path("nope.rules")])
    #expect(missing.status == 1, "\(missing)")
    #expect(missing.stderr.contains("nope.rules"))
  }

  static func eval(_ extra: [String]) throws -> RunResult {
    try CLI.larder(["rules", "eval", example, "--op", "write", "--path", "/b/app/o/users/u1/x.png"] + extra)
  }

  @Test func exampleRulesEvalOwnerFolder() throws {
    // users/{uid}/…: read and write for the owner only (see storage.rules.example).
    let owner = try Self.eval(["--uid", "u1", "--size", "100", "--content-type", "image/png"])
    #expect(owner.status == 0, "\(owner)")
    // `write` is create, update and delete: one line each, all allowed by the users/{uid} rule.
    #expect(
      owner.stdoutLines.map { String($0.prefix(while: { $0 != "-" })) } == [
        "create: ALLOW ", "update: ALLOW ", "delete: ALLOW ",
      ], "\(owner)")
    let rule = owner.stdoutLines.first.map { String($0.split(separator: " ").last ?? "") } ?? ""
    #expect(rule.hasPrefix(Self.example + ":"), "\(owner)")
    // The deciding rule is the `allow read, write: if isOwner(uid)` line of the example.
    let ruleLine = Int(rule.dropFirst(Self.example.count + 1).split(separator: ":").first ?? "") ?? 0
    let exampleLines = try String(contentsOfFile: Self.example, encoding: .utf8).split(
      separator: "\n", omittingEmptySubsequences: false)
    #expect(
      ruleLine > 0 && ruleLine <= exampleLines.count
        && exampleLines[ruleLine - 1].contains("allow read, write: if isOwner(uid);"))
    let other = try Self.eval(["--uid", "u2", "--size", "100", "--content-type", "image/png"])
    #expect(other.status == 1, "\(other)")
    #expect(
      other.stdoutLines.count == 3 && other.stdoutLines.allSatisfy { $0.contains(": DENY - ") }, "\(other)")
    let anonymous = try Self.eval(["--size", "100"])
    #expect(anonymous.status == 1)
    #expect(anonymous.stdoutLines.count == 3 && anonymous.stdoutLines.allSatisfy { $0.contains(": DENY - ") })

    // images/{uid}/…: only images of at most 5 MiB.
    func images(_ type: String, _ size: String) throws -> RunResult {
      try CLI.larder([
        "rules", "eval", Self.example, "--op", "create", "--path", "/b/app/o/images/u1/a", "--uid", "u1",
        "--size", size,
        "--content-type", type,
      ])
    }
    #expect(try images("image/png", "5MiB").status == 0)
    #expect(try images("image/png", "5242881").status == 1)
    #expect(try images("text/html", "10").status == 1)
    // public/…: anyone reads.
    let read = try CLI.larder(["rules", "eval", Self.example, "--op", "read", "--path", "/b/app/o/public/x"])
    #expect(read.status == 0, "\(read)")
    #expect(
      try CLI.larder(["rules", "eval", Self.example, "--op", "read", "--path", "/b/app/o/elsewhere"]).status
        == 1)
  }

  @Test func rulesEvalBadOperationIsUsage() throws {
    let result = try CLI.larder(["rules", "eval", Self.example, "--op", "frobnicate", "--path", "/b/app/o/x"])
    #expect(result.status == 2, "\(result)")
    #expect(result.stderrLines.first?.hasPrefix("larder: error: ") == true)
  }
}
