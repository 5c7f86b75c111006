import Foundation
import LarderAuth
import LarderCrypto
import LarderServer
import LarderTestSupport
import Testing

/// Firebase Auth ID tokens on a live server: `Authorization: Firebase <token>`, RS256 with a
/// `kid`, verified against Google's `kid` → certificate JSON (certificates made here by openssl,
/// written in that exact format), with the project's issuer and audience, and reloaded when the
/// file changes.
@Suite struct FirebaseTokenTests {
  static let project = "demo-project"
  static let issuer = "https://securetoken.google.com/demo-project"

  /// A scratch directory with certificates of the fixture keys `rsa` and `rsa-other`.
  final class Certificates {
    let directory: URL
    let openssl = OpenSSLTool.shared
    var keyFile: URL { directory.appendingPathComponent("securetoken.json") }

    init() throws {
      directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-fbtok-\(UUID().uuidString)")
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    func pem(_ key: String) throws -> String {
      String(
        decoding: try openssl.run([
          "req", "-new", "-x509", "-key", openssl.path(key), "-subj", "/CN=securetoken-\(key)", "-days", "2",
        ]), as: UTF8.self)
    }

    /// Writes the key file as Google serves it: `{"kid": "-----BEGIN CERTIFICATE-----\n…"}`.
    func publish(_ entries: [(kid: String, key: String)]) throws {
      let fields = try entries.map { "  \"\($0.kid)\": \"\(try pem($0.key).replacingOccurrences(of: "\n", with: "\\n"))\"" }
      try Data("{\n\(fields.joined(separator: ",\n"))\n}\n".utf8).write(to: keyFile)
    }

    /// An ID token as Firebase Auth issues it, signed by `key` and naming `kid`.
    func idToken(
      uid: String = "alice", kid: String, key: String = "rsa", issuer: String = FirebaseTokenTests.issuer,
      audience: String = FirebaseTokenTests.project
    ) throws -> String {
      let now = Int64(Date().timeIntervalSince1970)
      let claims: [String: JSONValue] = [
        "iss": .string(issuer), "aud": .string(audience), "auth_time": .int(now - 10), "user_id": .string(uid),
        "sub": .string(uid), "iat": .int(now), "exp": .int(now + 3600),
        "firebase": ["identities": [:], "sign_in_provider": "anonymous"],
      ]
      let input =
        ForgedJWT.part(["alg": "RS256", "kid": .string(kid), "typ": "JWT"]) + "." + ForgedJWT.part(claims)
      return input + "." + Base64URL.encode(try openssl.signRS256(input, key: key))
    }
  }

  func expectUnauthenticated(
    _ r: WireResponse, _ label: String, _ message: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    #expect(r.status == 401, "\(label): \(r.status) \(r.text.prefix(200))", sourceLocation: sourceLocation)
    #expect(r.error?["status"] as? String == "UNAUTHENTICATED", "\(label)", sourceLocation: sourceLocation)
    #expect(r.error?["message"] as? String == message, "\(label)", sourceLocation: sourceLocation)
  }

  static let path = "/v0/b/app/o/users%2Falice%2Fa.txt"

  func get(_ s: some ServiceHarness, _ token: String) throws -> WireResponse {
    try s.send(.get(Self.path + "?alt=media", [("Authorization", "Firebase \(token)")]))
  }

  func configure(_ certificates: Certificates) -> (inout LarderService.Options) -> Void {
    { options in
      options.publicKeyFiles = [certificates.keyFile]
      options.jwtIssuer = Self.issuer
      options.jwtAudience = Self.project
    }
  }

  @Test func idTokensVerifyAgainstGooglesCertificateJSON() throws {
    let certificates = try Certificates()
    try certificates.publish([("kid-a", "rsa"), ("kid-b", "rsa-other")])
    try withInProcessRulesService(configure: configure(certificates)) { s in
      let upload = try s.send(
        .init(
          "POST", "/v0/b/app/o?name=users%2Falice%2Fa.txt",
          headers: [("Authorization", "Firebase \(try certificates.idToken(kid: "kid-a"))")], body: Array("A".utf8)))
      #expect(upload.status == 200, "\(upload.text)")
      #expect(try get(s, try certificates.idToken(kid: "kid-a")).text == "A")
      #expect(try get(s, try certificates.idToken(kid: "kid-b", key: "rsa-other")).text == "A")
      // The rules see the token's uid: bob's valid token is refused by them, not by auth.
      #expect(try get(s, try certificates.idToken(uid: "bob", kid: "kid-a")).status == 403)

      expectUnauthenticated(
        try get(s, try certificates.idToken(kid: "kid-c")), "unknown kid", AuthError.unknownKey(kid: "kid-c").message)
      expectUnauthenticated(
        try get(s, try certificates.idToken(kid: "kid-b")), "kid of another certificate", "token signature is invalid")
      expectUnauthenticated(
        try get(s, try certificates.idToken(kid: "kid-a", issuer: "https://securetoken.google.com/other-project")),
        "wrong issuer", "token issuer is not accepted")
      expectUnauthenticated(
        try get(s, try certificates.idToken(kid: "kid-a", audience: "other-project")), "wrong audience",
        "token audience is not accepted")
      // The data directory's HS256 tokens carry no Firebase issuer: refused too.
      expectUnauthenticated(
        try get(s, s.service.developmentToken(uid: "alice")), "HS256 without iss", "token issuer is not accepted")
    }
  }

  @Test func reloadSwapsTheKeysAndABrokenFileKeepsTheOldOnes() throws {
    let certificates = try Certificates()
    try certificates.publish([("old", "rsa")])
    try withInProcessRulesService(configure: configure(certificates)) { s in
      let seeded = try s.send(
        .init(
          "POST", "/v0/b/app/o?name=users%2Falice%2Fa.txt",
          headers: [("Authorization", "Firebase \(try certificates.idToken(kid: "old"))")], body: Array("A".utf8)))
      #expect(seeded.status == 200)
      // Google rotates: the file now names only a new certificate.
      try certificates.publish([("new", "rsa-other")])
      #expect(try get(s, try certificates.idToken(kid: "old")).text == "A")  // not until reloaded
      #expect(s.service.reload() == ["larder: rules reloaded", "larder: public keys reloaded"])
      #expect(try get(s, try certificates.idToken(kid: "new", key: "rsa-other")).text == "A")
      expectUnauthenticated(
        try get(s, try certificates.idToken(kid: "old")), "retired kid", AuthError.unknownKey(kid: "old").message)

      // A half-written file keeps every key that was loaded.
      try Data(#"{"next": "-----BEGIN CERTIFICATE-----\nMIIC"#.utf8).write(to: certificates.keyFile)
      let lines = s.service.reload()
      #expect(lines.count == 2)
      #expect(
        lines.last?.hasPrefix(
          "larder: public key reload failed, keeping the previous keys: key file \(certificates.keyFile.path): ")
          == true, "\(lines)")
      #expect(try get(s, try certificates.idToken(kid: "new", key: "rsa-other")).text == "A")
      try FileManager.default.removeItem(at: certificates.keyFile)
      #expect(s.service.reload().last?.hasPrefix("larder: public key reload failed") == true)
      #expect(try get(s, try certificates.idToken(kid: "new", key: "rsa-other")).text == "A")
    }
  }

  /// The real binary: `larder serve --public-key FILE`, then SIGHUP after Google "rotates".
  @Test func sighupReloadsThePublicKeysOfARunningServer() throws {
    let certificates = try Certificates()
    try certificates.publish([("old", "rsa")])
    let work = certificates.directory
    let server = try ServeProcess(
      [
        "--rules", exampleRulesURL.path, "--data", work.appendingPathComponent("data").path, "--public-key",
        certificates.keyFile.path, "--jwt-issuer", Self.issuer, "--jwt-audience", Self.project, "--access-log", "off",
      ], in: work)
    /// The status of a metadata GET of alice's missing file: 404 when the token is accepted.
    func status(_ token: String) throws -> Int {
      try server.status(of: .get(Self.path, [("Authorization", "Firebase \(token)")]))
    }
    #expect(try status(try certificates.idToken(kid: "old")) == 404)
    #expect(try status(try certificates.idToken(kid: "new", key: "rsa-other")) == 401)

    try certificates.publish([("new", "rsa-other")])
    #expect(server.signal(SIGHUP))
    try server.poll("the new key") { try status(try certificates.idToken(kid: "new", key: "rsa-other")) == 404 }
    #expect(try status(try certificates.idToken(kid: "old")) == 401)
    try server.poll("the reload note") { server.stderr.contains("larder: public keys reloaded") }

    let wstatus = try #require(server.stop(), "SIGTERM")
    #expect(wstatus & 0x7f == 0)
  }
}
