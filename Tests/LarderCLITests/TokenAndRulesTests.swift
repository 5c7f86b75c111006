import Foundation
import LarderTestSupport
import Testing

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

    // The secret was made with mode 0600, and is reused: the same claims sign the same way.
    var st = stat()
    #expect(stat(box.data.appendingPathComponent("secret").path, &st) == 0)
    #expect(st.st_mode & 0o777 == 0o600)
    let secret = try Data(contentsOf: box.data.appendingPathComponent("secret"))
    #expect(secret.count >= 32)
    _ = try box.larder("token", "--uid", "u2")
    #expect(try Data(contentsOf: box.data.appendingPathComponent("secret")) == secret)
    // A short TTL and the default one.
    let short = try box.larder("token", "--uid", "u2", "--ttl", "30s")
    let shortClaims =
      try JSONSerialization.jsonObject(
        with: #require(Self.base64URLDecode(short.stdout.split(separator: ".")[1]))) as? [String: Any]
    let shortExp = shortClaims?["exp"] as? Double ?? 0
    #expect(shortExp > Date().timeIntervalSince1970 - 60 && shortExp < Date().timeIntervalSince1970 + 31)
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
