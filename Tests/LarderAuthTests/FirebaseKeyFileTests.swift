import Foundation
import LarderCrypto
import LarderTestSupport
import Testing

@testable import LarderAuth

/// Google's published key format for Firebase Auth ID tokens: a JSON object mapping each `kid`
/// to a PEM certificate, with certificates made by `openssl` and written exactly as Google does.
struct FirebaseKeyFileTests {
  let tool = OpenSSLTool.shared
  let now = Date(timeIntervalSince1970: 1_700_000_000)
  let claims: [String: JSONValue] = [
    "iss": "https://securetoken.google.com/demo-project", "aud": "demo-project", "sub": "alice",
    "user_id": "alice", "auth_time": 1_699_999_000, "iat": 1_700_000_000, "exp": 1_700_003_600,
    "firebase": ["identities": [:], "sign_in_provider": "anonymous"],
  ]

  /// A self-signed certificate for fixture key `key` (`rsa`, `rsa-other`), made by `openssl req`.
  func certificate(_ key: String) throws -> String {
    String(
      decoding: try tool.run(["req", "-new", "-x509", "-key", tool.path(key), "-subj", "/CN=\(key)", "-days", "2"]),
      as: UTF8.self)
  }

  /// `{"kid": "-----BEGIN CERTIFICATE-----\nMII…\n-----END CERTIFICATE-----\n", …}`, newlines
  /// escaped as `\n`, as https://www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com serves it.
  static func googleJSON(_ entries: [(kid: String, pem: String)]) -> [UInt8] {
    let fields = entries.map { "  \"\($0.kid)\": \"\($0.pem.replacingOccurrences(of: "\n", with: "\\n"))\"" }
    return Array("{\n\(fields.joined(separator: ",\n"))\n}\n".utf8)
  }

  func token(kid: String, key: String = "rsa") throws -> String {
    let input = TestJWT.signingInput(alg: "RS256", kid: kid, claims: claims)
    return TestJWT.token(input, try tool.signRS256(input, key: key))
  }

  @Test func eachCertificateVerifiesTokensThatNameItsKid() throws {
    let keys = try KeyLoader.x509Certificates(
      Self.googleJSON([("b-kid", try certificate("rsa-other")), ("a-kid", try certificate("rsa"))]))
    #expect(keys.map(\.kid) == ["a-kid", "b-kid"])
    #expect(keys.map(\.algorithm) == [.rs256, .rs256])
    let verifier = JWTVerifier(
      hmacSecret: nil, publicKeys: keys, issuer: "https://securetoken.google.com/demo-project",
      audience: "demo-project")
    let verified = try verifier.verify(try token(kid: "a-kid"), now: now)
    #expect(verified.uid == "alice")
    #expect(verified.claims == claims)
    #expect(try verifier.verify(try token(kid: "b-kid", key: "rsa-other"), now: now).uid == "alice")
    // The kid selects the certificate: another kid's certificate does not verify it.
    #expect(failure { try verifier.verify(try token(kid: "b-kid"), now: now) } == .invalidSignature)
    #expect(failure { try verifier.verify(try token(kid: "c-kid"), now: now) } == .unknownKey(kid: "c-kid"))
    let noKid = TestJWT.signingInput(alg: "RS256", claims: claims)
    // Without a kid every certificate is tried (Google's tokens always carry one).
    #expect(try verifier.verify(TestJWT.token(noKid, try tool.signRS256(noKid)), now: now).uid == "alice")
    let wrongProject = JWTVerifier(
      hmacSecret: nil, publicKeys: keys, issuer: "https://securetoken.google.com/other", audience: "demo-project")
    #expect(failure { try wrongProject.verify(try token(kid: "a-kid"), now: now) } == .invalidIssuer)
    let wrongAudience = JWTVerifier(
      hmacSecret: nil, publicKeys: keys, issuer: "https://securetoken.google.com/demo-project", audience: "other")
    #expect(failure { try wrongAudience.verify(try token(kid: "a-kid"), now: now) } == .invalidAudience)
  }

  @Test func fileFormatIsToldApartByContent() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("larder-keyfiles-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let google = dir.appendingPathComponent("securetoken.json")
    try Data(Self.googleJSON([("k1", try certificate("rsa"))])).write(to: google)
    let fromGoogle = try KeyLoader.file(at: google)
    #expect(fromGoogle.map(\.kid) == ["k1"])
    #expect(fromGoogle[0].key.kind == .rsa(bits: 2048))
    // The PEM text itself contains "-----BEGIN": it must not be taken for a PEM file (it is
    // JSON), nor a PEM file for JSON.
    let pem = try KeyLoader.file(at: tool.url("rsa.pub"))
    #expect(pem.map(\.kid) == [nil])
    let rsa = try tool.rsaComponents("rsa")
    let jwksFile = dir.appendingPathComponent("jwks.json")
    try Data(
      #"  {"keys": [{"kty": "RSA", "kid": "j1", "n": "\#(Base64URL.encode(rsa.n))", "e": "\#(Base64URL.encode(rsa.e))"}]}"#
        .utf8
    ).write(to: jwksFile)
    #expect(try KeyLoader.file(at: jwksFile).map(\.kid) == ["j1"])
    // All three name the same RSA key: a token of it verifies against each.
    let input = TestJWT.signingInput(alg: "RS256", kid: "k1", claims: claims)
    let signed = TestJWT.token(input, try tool.signRS256(input))
    for keys in [fromGoogle, pem] {
      #expect(try JWTVerifier(hmacSecret: nil, publicKeys: keys).verify(signed, now: now).uid == "alice")
    }
  }

  @Test func malformedCertificateMapsAreRefusedWithTheReason() throws {
    let publicKeyPEM = String(decoding: tool.contents("rsa.pub"), as: UTF8.self)
    let cases: [([UInt8], String)] = [
      (Array("{}".utf8), #"no certificates (expected {"<kid>": "-----BEGIN CERTIFICATE-----..."})"#),
      (Array("[]".utf8), "not a JSON object mapping key ids to PEM certificates"),
      (Array(#"{"k1": 5}"#.utf8), #""k1" is not a PEM certificate"#),
      (Self.googleJSON([("k1", publicKeyPEM)]), #""k1" is not a PEM certificate"#),
      (
        Self.googleJSON([("k1", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")]),
        #""k1": invalid key: no PEM "PUBLIC KEY" or "CERTIFICATE" block could be read"#
      ),
    ]
    for (bytes, reason) in cases {
      #expect(throws: AuthConfigurationError.invalidKeyFile(path: "keys.json", reason: reason)) {
        try KeyLoader.x509Certificates(bytes, source: "keys.json")
      }
    }
  }
}
