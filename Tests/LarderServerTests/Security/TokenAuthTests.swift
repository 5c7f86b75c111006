import Foundation
import LarderAuth
import LarderCrypto
import LarderTestSupport
import LarderServer
import Testing

/// Bearer tokens on a live server: which are accepted, and how the others are refused.
@Suite struct TokenAuthTests {
  static let ownPath = "/v0/b/app/o/users%2Falice%2Fa.txt"
  static let badSignature = "token signature is invalid"
  static let algNone = #"unsupported token algorithm "none""#
  static let badIssuer = "token issuer is not accepted"
  static let badAudience = "token audience is not accepted"

  /// The `exp` claim of a compact token, read independently of the verifier.
  static func exp(_ token: String) throws -> Int64 {
    let payload = try #require(Base64URL.decode(String(token.split(separator: ".")[1])))
    let claims = try #require(JSONValue.parseObject(payload))
    guard case .int(let exp)? = claims["exp"] else { throw HarnessFailure("no integer exp in \(claims)") }
    return exp
  }

  /// A 401 with the standard body and exactly `message` (``AuthError/message``), so each refusal is
  /// known to be for the intended reason.
  func expectUnauthenticated(
    _ r: WireResponse, _ label: String, _ message: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    #expect(r.status == 401, "\(label): \(r.status) \(r.text.prefix(200))", sourceLocation: sourceLocation)
    #expect(r.error?["message"] as? String == message, "\(label)", sourceLocation: sourceLocation)
    #expect(r.error?["code"] as? Int == 401, "\(label)", sourceLocation: sourceLocation)
    #expect(r.error?["status"] as? String == "UNAUTHENTICATED", "\(label)", sourceLocation: sourceLocation)
    #expect(r["WWW-Authenticate"] == "Bearer", "\(label)", sourceLocation: sourceLocation)
  }

  /// Seeds alice's file and runs `body`; alice's own file answers 200 "A" to a good token.
  func withSeeded(
    configure: (inout LarderService.Options) -> Void = { _ in }, seedClaims: [String: JSONValue] = [:],
    _ body: (InProcessService) throws -> Void
  ) throws {
    try withInProcessRulesService(configure: configure) { s in
      let seed = ForgedJWT.hs256(ForgedJWT.claims(uid: "alice", extra: seedClaims), secret: s.service.secret)
      let up = try s.send(
        .init(
          "POST", "/v0/b/app/o?name=users%2Falice%2Fa.txt", headers: [("Authorization", "Bearer \(seed)")],
          body: [0x41]))
      #expect(up.status == 200)
      try body(s)
    }
  }

  func get(_ s: some ServiceHarness, _ authorization: String) throws -> WireResponse {
    try s.send(.get(Self.ownPath + "?alt=media", [("Authorization", authorization)]))
  }

  @Test func hs256TokensOfTheDataDirectorySecret() throws {
    try withSeeded { s in
      let good = s.service.developmentToken(uid: "alice")
      #expect(try get(s, "Bearer \(good)").text == "A")
      #expect(try get(s, "Firebase \(good)").text == "A")
      // Same secret, hand-signed with extra claims: accepted; another user's token: 403, not 401.
      let handmade = ForgedJWT.hs256(
        ForgedJWT.claims(uid: "alice", extra: ["role": "x"]), secret: s.service.secret)
      #expect(try get(s, "Bearer \(handmade)").text == "A")
      let bob = try get(s, "Bearer \(s.service.developmentToken(uid: "bob"))")
      #expect(bob.status == 403)
      #expect(bob.error?["status"] as? String == "PERMISSION_DENIED")
      // Anonymous is 403 (a decision about nobody), not 401.
      #expect(try s.send(.get(Self.ownPath + "?alt=media")).status == 403)

      let expired = s.service.developmentToken(uid: "alice", ttl: -3600)
      expectUnauthenticated(
        try get(s, "Bearer \(expired)"), "expired", "token expired at \(try Self.exp(expired)) (unix time)")
      let parts = good.split(separator: ".").map(String.init)
      let forgedPayload = ForgedJWT.part(ForgedJWT.claims(uid: "alice", ttl: 7200))
      expectUnauthenticated(try get(s, "Bearer \(parts[0]).\(forgedPayload).\(parts[2])"), "tampered payload", Self.badSignature)
      var flipped = Array(parts[2].utf8)
      flipped[0] = flipped[0] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
      expectUnauthenticated(
        try get(s, "Bearer \(parts[0]).\(parts[1]).\(String(decoding: flipped, as: UTF8.self))"),
        "tampered signature", Self.badSignature)
      let otherSecret = ForgedJWT.hs256(
        ForgedJWT.claims(uid: "alice"), secret: Array(repeating: 7, count: 32))
      expectUnauthenticated(try get(s, "Bearer \(otherSecret)"), "other secret", Self.badSignature)
      let none =
        ForgedJWT.part(["alg": "none", "typ": "JWT"]) + "." + ForgedJWT.part(ForgedJWT.claims(uid: "alice"))
        + "."
      expectUnauthenticated(try get(s, "Bearer \(none)"), "alg none", Self.algNone)
      let noneUpper =
        ForgedJWT.part(["alg": "NONE"]) + "." + ForgedJWT.part(ForgedJWT.claims(uid: "alice")) + ".AAAA"
      expectUnauthenticated(try get(s, "Bearer \(noneUpper)"), "alg NONE", #"unsupported token algorithm "NONE""#)
      let noSub = ForgedJWT.hs256(
        ["exp": .int(Int64(Date().timeIntervalSince1970) + 600)], secret: s.service.secret)
      expectUnauthenticated(try get(s, "Bearer \(noSub)"), "no sub", "token has no subject (sub)")
      // A 401 never leaks whether the object exists.
      expectUnauthenticated(
        try s.send(.get("/v0/b/app/o/nothing", [("Authorization", "Bearer \(none)")])), "missing object", Self.algNone)
      expectUnauthenticated(
        try s.send(
          .init(
            "POST", "/v0/b/app/o?name=users%2Falice%2Fz", headers: [("Authorization", "Bearer \(none)")],
            body: [1])),
        "upload", Self.algNone)
    }
  }

  @Test func rs256AgainstConfiguredPEMKeys() throws {
    let openssl = OpenSSLTool.shared
    try withSeeded(configure: { $0.publicKeyFiles = [URL(fileURLWithPath: openssl.path("rsa.pub"))] }) { s in
      let good = try openssl.rs256(ForgedJWT.claims(uid: "alice"))
      #expect(try get(s, "Bearer \(good)").text == "A")
      let otherKey = try openssl.rs256(ForgedJWT.claims(uid: "alice"), key: "rsa-other")
      expectUnauthenticated(try get(s, "Bearer \(otherKey)"), "other RSA key", Self.badSignature)
      let expired = try openssl.rs256(ForgedJWT.claims(uid: "alice", ttl: -3600))
      expectUnauthenticated(
        try get(s, "Bearer \(expired)"), "expired RS256", "token expired at \(try Self.exp(expired)) (unix time)")
      // Algorithm confusion: HS256 keyed with the RSA public key's PEM text.
      let pem = Array(FileManager.default.contents(atPath: openssl.path("rsa.pub")) ?? Data())
      #expect(pem.count > 400)
      expectUnauthenticated(
        try get(s, "Bearer \(ForgedJWT.hs256(ForgedJWT.claims(uid: "alice"), secret: pem))"), "HS256 with PEM",
        Self.badSignature)
      // The HS256 secret still works alongside.
      #expect(try get(s, "Bearer \(s.service.developmentToken(uid: "alice"))").text == "A")
    }
  }

  @Test func issuerAndAudienceAreEnforcedWhenConfigured() throws {
    try withSeeded(
      configure: {
        $0.jwtIssuer = "https://id.example.com"
        $0.jwtAudience = "larder-app"
      }, seedClaims: ["iss": "https://id.example.com", "aud": "larder-app"]
    ) { s in
      func token(_ extra: [String: JSONValue]) -> String {
        ForgedJWT.hs256(ForgedJWT.claims(uid: "alice", extra: extra), secret: s.service.secret)
      }
      #expect(
        try get(s, "Bearer \(token(["iss": "https://id.example.com", "aud": "larder-app"]))").text == "A")
      #expect(
        try get(
          s,
          "Bearer \(token(["iss": "https://id.example.com", "aud": .array([.string("other"), .string("larder-app")])]))"
        ).text == "A")
      expectUnauthenticated(
        try get(s, "Bearer \(s.service.developmentToken(uid: "alice"))"), "no iss, no aud", Self.badIssuer)
      expectUnauthenticated(try get(s, "Bearer \(token(["aud": "larder-app"]))"), "no iss", Self.badIssuer)
      expectUnauthenticated(
        try get(s, "Bearer \(token(["iss": "https://evil.example.com", "aud": "larder-app"]))"), "wrong iss", Self.badIssuer)
      expectUnauthenticated(try get(s, "Bearer \(token(["iss": "https://id.example.com"]))"), "no aud", Self.badAudience)
      expectUnauthenticated(
        try get(s, "Bearer \(token(["iss": "https://id.example.com", "aud": "other"]))"), "wrong aud", Self.badAudience)
    }
  }
}
