import Foundation
import LarderCrypto
import LarderTestSupport
import Synchronization
import Testing

@testable import LarderAuth

/// The outcome of a verification as a value, so tests can compare errors exactly.
/// A non-`AuthError` (a failing openssl fixture) is recorded as a test issue.
func failure(_ body: () throws -> VerifiedToken) -> AuthError? {
  do {
    _ = try body()
    return nil
  } catch let error as AuthError {
    return error
  } catch {
    Issue.record(error)
    return nil
  }
}

struct JWTVerifierTests {
  let tool = OpenSSLTool.shared
  let now = Date(timeIntervalSince1970: 1_700_000_000)
  let secret: [UInt8] = Array(0..<32)
  var claims: [String: JSONValue] {
    ["sub": "alice", "iat": 1_700_000_000, "exp": 1_700_003_600, "admin": true, "groups": ["a", "b"]]
  }

  func verifier(keys: [VerificationKey] = [], issuer: String? = nil, audience: String? = nil) -> JWTVerifier {
    JWTVerifier(hmacSecret: secret, publicKeys: keys, issuer: issuer, audience: audience)
  }

  func rsaKeys(kid: String? = nil) throws -> [VerificationKey] {
    try KeyLoader.pemFile(at: tool.url("rsa.pub"), kid: kid)
  }

  func ecKeys(kid: String? = nil) throws -> [VerificationKey] {
    try KeyLoader.pemFile(at: tool.url("ec.pub"), kid: kid)
  }

  @Test func hs256TokenSignedByOpenSSLVerifies() throws {
    let input = TestJWT.signingInput(alg: "HS256", claims: claims)
    let token = TestJWT.token(input, try tool.signHS256(input, secret: secret))
    let verified = try verifier().verify(token, now: now)
    #expect(verified.uid == "alice")
    #expect(verified.claims == claims)
    #expect(verified.expiresAt == Date(timeIntervalSince1970: 1_700_003_600))
    #expect(verified.algorithm == .hs256)
  }

  @Test func rs256TokenSignedByOpenSSLVerifies() throws {
    let input = TestJWT.signingInput(alg: "RS256", kid: "r1", claims: claims)
    let token = TestJWT.token(input, try tool.signRS256(input))
    let verified = try verifier(keys: rsaKeys(kid: "r1")).verify(token, now: now)
    #expect(verified.uid == "alice")
    #expect(verified.claims == claims)
    #expect(verified.algorithm == .rs256)
    // A key loaded without a kid accepts the token too.
    #expect(try verifier(keys: rsaKeys()).verify(token, now: now).uid == "alice")
  }

  @Test func es256TokenSignedByOpenSSLVerifies() throws {
    let input = TestJWT.signingInput(alg: "ES256", claims: claims)
    let signature = try tool.signES256(input)
    #expect(signature.count == 64)
    let verified = try verifier(keys: ecKeys()).verify(TestJWT.token(input, signature), now: now)
    #expect(verified.uid == "alice")
    #expect(verified.claims == claims)
    #expect(verified.algorithm == .es256)
  }

  @Test func jwksKeysFromOpenSSLComponentsVerifyBothAlgorithms() throws {
    let rsa = try tool.rsaComponents("rsa")
    let ec = try tool.ecComponents("ec")
    #expect(rsa.n.count == 256)
    #expect(rsa.e == [0x01, 0x00, 0x01])
    let jwks = """
      {"keys": [
        {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256", "n": "\(Base64URL.encode(rsa.n))", "e": "\(Base64URL.encode(rsa.e))"},
        {"kty": "EC", "kid": "ec-1", "crv": "P-256", "x": "\(Base64URL.encode(ec.x))", "y": "\(Base64URL.encode(ec.y))"}
      ]}
      """
    let keys = try KeyLoader.jwks(Array(jwks.utf8))
    #expect(keys.map(\.kid) == ["rsa-1", "ec-1"])
    #expect(keys.map(\.algorithm) == [.rs256, .es256])
    let v = verifier(keys: keys)

    let rsInput = TestJWT.signingInput(alg: "RS256", kid: "rsa-1", claims: claims)
    #expect(try v.verify(TestJWT.token(rsInput, tool.signRS256(rsInput)), now: now).uid == "alice")
    let esInput = TestJWT.signingInput(alg: "ES256", kid: "ec-1", claims: claims)
    #expect(try v.verify(TestJWT.token(esInput, tool.signES256(esInput)), now: now).uid == "alice")
    // Without a kid, every key of the algorithm's type is tried.
    let noKid = TestJWT.signingInput(alg: "ES256", claims: claims)
    #expect(try v.verify(TestJWT.token(noKid, tool.signES256(noKid)), now: now).uid == "alice")
  }

  @Test func certificatePEMProvidesTheKey() throws {
    let keys = try KeyLoader.pemFile(at: tool.url("rsa.crt"))
    #expect(keys.count == 1)
    let input = TestJWT.signingInput(alg: "RS256", claims: claims)
    #expect(
      try verifier(keys: keys).verify(TestJWT.token(input, tool.signRS256(input)), now: now).uid == "alice")
  }

  @Test func expiredTokenIsRefusedAfterLeeway() throws {
    let input = TestJWT.signingInput(alg: "ES256", claims: claims)
    let token = TestJWT.token(input, try tool.signES256(input))
    let v = try verifier(keys: ecKeys())
    let exp = Date(timeIntervalSince1970: 1_700_003_600)
    #expect(try v.verify(token, now: exp.addingTimeInterval(60)).uid == "alice")
    #expect(failure { try v.verify(token, now: exp.addingTimeInterval(61)) } == .expired(expiresAt: exp))
    #expect(AuthError.expired(expiresAt: exp).code == "token_expired")
  }

  @Test func notYetValidTokenIsRefused() throws {
    var future = claims
    future["nbf"] = 1_700_000_600
    let input = TestJWT.signingInput(alg: "RS256", claims: future)
    let token = TestJWT.token(input, try tool.signRS256(input))
    let v = try verifier(keys: rsaKeys())
    #expect(
      failure { try v.verify(token, now: now) }
        == .notYetValid(validFrom: Date(timeIntervalSince1970: 1_700_000_600)))
    #expect(try v.verify(token, now: now.addingTimeInterval(541)).uid == "alice")

    let iatToken = TokenIssuer(secret: secret).issue(
      uid: "bob", claims: [:], ttl: 600, now: now.addingTimeInterval(120))
    #expect(
      failure { try v.verify(iatToken, now: now) }
        == .notYetValid(validFrom: Date(timeIntervalSince1970: 1_700_000_120)))
    #expect(try v.verify(iatToken, now: now.addingTimeInterval(60)).uid == "bob")
  }

  @Test func absurdTimesGiveMessagesNotTraps() throws {
    var past = claims
    past["exp"] = .double(-1e300)
    let pastInput = TestJWT.signingInput(alg: "HS256", claims: past)
    let expired = failure { try verifier().verify(TestJWT.token(pastInput, try tool.signHS256(pastInput, secret: secret)), now: now) }
    #expect(expired == .expired(expiresAt: Date(timeIntervalSince1970: -1e300)))
    #expect(expired?.message == "token expired at -1e+300 (unix time)")
    var future = claims
    future["nbf"] = .double(1e300)
    let futureInput = TestJWT.signingInput(alg: "HS256", claims: future)
    let early = failure { try verifier().verify(TestJWT.token(futureInput, try tool.signHS256(futureInput, secret: secret)), now: now) }
    #expect(early?.message == "token is not valid before 1e+300 (unix time)")
    #expect(AuthError.expired(expiresAt: Date(timeIntervalSince1970: 1_700_000_000.9)).message
      == "token expired at 1700000000 (unix time)")
  }

  @Test func issuedTokensSaturateInsteadOfTrapping() throws {
    #expect(TokenIssuer.expiry(issuedAt: 1_700_000_000, ttl: 3600.9) == 1_700_003_600)
    #expect(TokenIssuer.expiry(issuedAt: 1_700_000_000, ttl: -3600) == 1_699_996_400)
    #expect(TokenIssuer.expiry(issuedAt: 1_700_000_000, ttl: 1e300) == .max)
    #expect(TokenIssuer.expiry(issuedAt: 1_700_000_000, ttl: 9.223372036854e18) == .max)
    #expect(TokenIssuer.expiry(issuedAt: -1_700_000_000, ttl: -9.223372036854e18) == .min)
    #expect(TokenIssuer.expiry(issuedAt: 1_700_000_000, ttl: -.infinity) == .min + 1_700_000_000)
    #expect(TokenIssuer.expiry(issuedAt: 1_700_000_000, ttl: .nan) == 1_700_000_000)
    let token = TokenIssuer(secret: secret).issue(uid: "u", ttl: .infinity, now: now)
    #expect(try verifier().verify(token, now: now).expiresAt == Date(timeIntervalSince1970: Double(Int64.max)))
  }

  @Test func tamperedPayloadIsRefused() throws {
    let input = TestJWT.signingInput(alg: "RS256", claims: claims)
    let signature = try tool.signRS256(input)
    var forged = claims
    forged["sub"] = "mallory"
    let tampered = TestJWT.signingInput(alg: "RS256", claims: forged)
    let v = try verifier(keys: rsaKeys())
    #expect(failure { try v.verify(TestJWT.token(tampered, signature), now: now) } == .invalidSignature)

    let hsInput = TestJWT.signingInput(alg: "HS256", claims: claims)
    let hsSig = try tool.signHS256(hsInput, secret: secret)
    #expect(
      failure {
        try v.verify(
          TestJWT.token(
            tampered.replacingOccurrences(
              of: TestJWT.encode(["alg": "RS256", "typ": "JWT"]),
              with: TestJWT.encode(["alg": "HS256", "typ": "JWT"])), hsSig), now: now)
      } == .invalidSignature)
    // A flipped bit in the signature itself.
    var bad = signature
    bad[100] ^= 0x01
    #expect(failure { try v.verify(TestJWT.token(input, bad), now: now) } == .invalidSignature)
  }

  @Test func tokenSignedByAnotherKeyIsRefused() throws {
    let rs = TestJWT.signingInput(alg: "RS256", claims: claims)
    let es = TestJWT.signingInput(alg: "ES256", claims: claims)
    let hs = TestJWT.signingInput(alg: "HS256", claims: claims)
    let v = try verifier(keys: rsaKeys() + ecKeys())
    #expect(
      failure { try v.verify(TestJWT.token(rs, tool.signRS256(rs, key: "rsa-other")), now: now) }
        == .invalidSignature)
    #expect(
      failure { try v.verify(TestJWT.token(es, tool.signES256(es, key: "ec-other")), now: now) }
        == .invalidSignature)
    #expect(
      failure { try v.verify(TestJWT.token(hs, tool.signHS256(hs, secret: Array(1...32))), now: now) }
        == .invalidSignature)
    // An EC signature under a header that claims RS256 meets only RSA keys.
    let mislabeled = TestJWT.token(rs, try tool.signES256(rs))
    #expect(failure { try v.verify(mislabeled, now: now) } == .invalidSignature)
  }

  @Test func algNoneIsRefusedInEveryCase() throws {
    let v = try verifier(keys: rsaKeys())
    for alg in ["none", "None", "NONE", "nOnE"] {
      let token = TestJWT.signingInput(alg: alg, claims: claims) + "."
      #expect(failure { try v.verify(token, now: now) } == .unsupportedAlgorithm(alg))
    }
    for alg in ["HS512", "RS384", "PS256", "EdDSA", "hs256", ""] {
      let input = TestJWT.signingInput(alg: alg, claims: claims)
      let token = TestJWT.token(input, try tool.signHS256(input, secret: secret))
      #expect(failure { try v.verify(token, now: now) } == .unsupportedAlgorithm(alg))
    }
    #expect(AuthError.unsupportedAlgorithm("none").code == "unsupported_algorithm")
  }

  @Test func hs256SignedWithThePublicKeyIsRefused() throws {
    let publicPEM = tool.contents("rsa.pub")
    #expect(publicPEM.starts(with: Array("-----BEGIN PUBLIC KEY-----".utf8)))
    let input = TestJWT.signingInput(alg: "HS256", claims: claims)
    let token = TestJWT.token(input, try tool.signHS256(input, secret: publicPEM))
    #expect(failure { try verifier(keys: rsaKeys()).verify(token, now: now) } == .invalidSignature)
    let keysOnly = JWTVerifier(hmacSecret: nil, publicKeys: try rsaKeys())
    #expect(failure { try keysOnly.verify(token, now: now) } == .unsupportedAlgorithm("HS256"))
    // And the converse: an RS256 token is never checked against the HMAC secret.
    let rs = TestJWT.signingInput(alg: "RS256", claims: claims)
    let hmacSigned = TestJWT.token(rs, try tool.signHS256(rs, secret: secret))
    #expect(failure { try verifier().verify(hmacSigned, now: now) } == .unsupportedAlgorithm("RS256"))
  }

  @Test func wrongKidIsRefused() throws {
    let input = TestJWT.signingInput(alg: "RS256", kid: "other", claims: claims)
    let token = TestJWT.token(input, try tool.signRS256(input))
    let v = try verifier(keys: rsaKeys(kid: "r1") + ecKeys(kid: "e1"))
    #expect(failure { try v.verify(token, now: now) } == .unknownKey(kid: "other"))
    // The right key under the EC kid: the kid names a key of the wrong type, so no key matches.
    let ecKid = TestJWT.signingInput(alg: "RS256", kid: "e1", claims: claims)
    #expect(
      failure { try v.verify(TestJWT.token(ecKid, tool.signRS256(ecKid)), now: now) }
        == .unknownKey(kid: "e1"))
    // A kid that is not a string.
    let header = TestJWT.encode(["alg": "RS256", "kid": 7])
    let numeric = header + "." + TestJWT.encode(claims)
    #expect(
      failure { try v.verify(TestJWT.token(numeric, tool.signRS256(numeric)), now: now) }
        == .malformedToken("kid is not a string"))
  }

  @Test func badBase64AndSegmentCountsAreRefused() throws {
    let input = TestJWT.signingInput(alg: "HS256", claims: claims)
    let good = TestJWT.token(input, try tool.signHS256(input, secret: secret))
    let parts = good.split(separator: ".").map(String.init)
    let v = verifier()
    #expect(try v.verify(good, now: now).uid == "alice")
    let cases: [(String, AuthError)] = [
      (parts[0] + "=." + parts[1] + "." + parts[2], .malformedToken("header is not base64url")),
      (parts[0] + "." + parts[1] + "." + parts[2] + "=", .malformedToken("signature is not base64url")),
      (
        parts[0] + "." + parts[1] + "."
          + parts[2].replacingOccurrences(of: "_", with: "/").replacingOccurrences(of: "-", with: "+") + "+",
        .malformedToken("signature is not base64url")
      ),
      (" " + good, .malformedToken("header is not base64url")),
      (parts[0] + "." + parts[1], .malformedToken("expected 3 dot-separated segments, found 2")),
      (good + ".", .malformedToken("expected 3 dot-separated segments, found 4")),
      ("", .malformedToken("expected 3 dot-separated segments, found 1")),
      ("..", .malformedToken("header is not a JSON object")),
      (
        Base64URL.encode(Array("not json".utf8)) + "." + parts[1] + "." + parts[2],
        .malformedToken("header is not a JSON object")
      ),
      (
        Base64URL.encode(Array("[\"HS256\"]".utf8)) + "." + parts[1] + "." + parts[2],
        .malformedToken("header is not a JSON object")
      ),
      (
        TestJWT.encode(["typ": "JWT"]) + "." + parts[1] + "." + parts[2], .malformedToken("header has no alg")
      ),
      (TestJWT.encode(["alg": 256]) + "." + parts[1] + "." + parts[2], .malformedToken("header has no alg")),
    ]
    for (token, expected) in cases {
      #expect(failure { try v.verify(token, now: now) } == expected, "\(token)")
    }
    // A payload that is signed but not base64url JSON.
    for payload in ["bm90IGpzb24", "e30*", "WzFd"] {
      let signed = parts[0] + "." + payload
      let token = TestJWT.token(signed, try tool.signHS256(signed, secret: secret))
      let expected: AuthError =
        payload == "e30*"
        ? .malformedToken("payload is not base64url") : .malformedToken("payload is not a JSON object")
      #expect(failure { try v.verify(token, now: now) } == expected)
    }
  }

  @Test func deeplyNestedJSONIsRefusedWithoutRecursion() throws {
    let deep = "{\"a\":" + String(repeating: "[", count: 6000) + String(repeating: "]", count: 6000) + "}"
    #expect(JSONValue.nestingDepth(Array(deep.utf8)) == 6001)
    #expect(JSONValue.parseObject(Array(deep.utf8)) == nil)
    #expect(JSONValue.nestingDepth(Array(#"{"a":"[[[[\"[[{{"}"#.utf8)) == 1)
    #expect(JSONValue.parseObject(Array(#"{"a":[[["\"]"]]]}"#.utf8)) == ["a": [[["\"]"]]]])
    let header = Base64URL.encode(Array(#"{"alg":"HS256","x":\#(String(repeating: "[", count: 3000))}"#.utf8))
    let token = header + ".e30.AAAA"
    let v = JWTVerifier(hmacSecret: secret, maxTokenSize: 16384)
    #expect(failure { try v.verify(token, now: now) } == .malformedToken("header is not a JSON object"))
  }

  @Test func oversizedTokenIsRefusedBeforeDecoding() throws {
    var big = claims
    big["pad"] = .string(String(repeating: "x", count: 9000))
    let token = TestJWT.signingInput(alg: "HS256", claims: big) + ".AAAA"
    let size = token.utf8.count
    #expect(failure { try verifier().verify(token, now: now) } == .tokenTooLarge(size: size, maxSize: 8192))
    let exactly = String(repeating: "a", count: 8193)
    #expect(failure { try verifier().verify(exactly, now: now) } == .tokenTooLarge(size: 8193, maxSize: 8192))
  }

  @Test func claimsAreCheckedForSubjectIssuerAudienceAndTypes() throws {
    func hs(_ c: [String: JSONValue], header: [String: JSONValue] = ["alg": "HS256"]) throws -> String {
      let input = TestJWT.encode(header) + "." + TestJWT.encode(c)
      return TestJWT.token(input, try tool.signHS256(input, secret: secret))
    }
    var c = claims
    c["iss"] = "https://idp.example"
    c["aud"] = ["storage", "other"]
    let strict = verifier(issuer: "https://idp.example", audience: "storage")
    #expect(try strict.verify(hs(c), now: now).uid == "alice")
    c["aud"] = "storage"
    #expect(try strict.verify(hs(c), now: now).uid == "alice")

    var wrongAud = c
    wrongAud["aud"] = ["other"]
    #expect(failure { try strict.verify(hs(wrongAud), now: now) } == .invalidAudience)
    wrongAud["aud"] = nil
    #expect(failure { try strict.verify(hs(wrongAud), now: now) } == .invalidAudience)
    var wrongIss = c
    wrongIss["iss"] = "https://evil.example"
    #expect(failure { try strict.verify(hs(wrongIss), now: now) } == .invalidIssuer)

    var noSub = claims
    noSub["sub"] = nil
    #expect(failure { try verifier().verify(hs(noSub), now: now) } == .missingSubject)
    noSub["sub"] = ""
    #expect(failure { try verifier().verify(hs(noSub), now: now) } == .missingSubject)
    noSub["sub"] = 42
    #expect(failure { try verifier().verify(hs(noSub), now: now) } == .missingSubject)

    var noExp = claims
    noExp["exp"] = nil
    #expect(failure { try verifier().verify(hs(noExp), now: now) } == .malformedToken("token has no exp"))
    noExp["exp"] = "1700003600"
    #expect(failure { try verifier().verify(hs(noExp), now: now) } == .malformedToken("exp is not a number"))
    #expect(
      failure { try verifier().verify(hs(claims, header: ["alg": "HS256", "crit": ["b64"]]), now: now) }
        == .malformedToken("crit header extensions are not supported"))
    // Embedded keys in the header are ignored, never trusted.
    let jwkHeader: [String: JSONValue] = [
      "alg": "HS256", "jwk": ["kty": "oct", "k": "AAAA"], "jku": "https://evil.example/jwks",
    ]
    #expect(try verifier().verify(hs(claims, header: jwkHeader), now: now).uid == "alice")
  }

  /// RFC 7515 Appendix A.1: the HS256 example, verified with the RFC's key.
  @Test func rfc7515AppendixA1Verifies() throws {
    let token =
      "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
      + ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
      + ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    let key = try #require(
      Base64URL.decode(
        "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"))
    #expect(key.count == 64)
    let v = JWTVerifier(hmacSecret: key, issuer: "joe")
    let (claims, algorithm) = try v.verifiedClaims(token)
    #expect(algorithm == .hs256)
    #expect(claims == ["iss": "joe", "exp": 1_300_819_380, "http://example.com/is_root": true])
    // The example has no `sub`, so full verification stops exactly there, after signature and times.
    let beforeExp = Date(timeIntervalSince1970: 1_300_819_000)
    #expect(failure { try v.verify(token, now: beforeExp) } == .missingSubject)
    #expect(
      failure { try v.verify(token, now: Date(timeIntervalSince1970: 1_300_819_441)) }
        == .expired(expiresAt: Date(timeIntervalSince1970: 1_300_819_380)))
    let otherKey = JWTVerifier(hmacSecret: Array(key.reversed()))
    #expect(failure { try otherKey.verify(token, now: beforeExp) } == .invalidSignature)
  }

  /// RFC 7515 Appendix A.3: the ES256 example, verified with the RFC's JWK.
  @Test func rfc7515AppendixA3Verifies() throws {
    let jwks = """
      {"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}
      """
    let token =
      "eyJhbGciOiJFUzI1NiJ9"
      + ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
      + ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"
    let v = JWTVerifier(hmacSecret: nil, publicKeys: try KeyLoader.jwks(Array(jwks.utf8)))
    let (claims, algorithm) = try v.verifiedClaims(token)
    #expect(algorithm == .es256)
    #expect(claims["iss"] == "joe")
  }

  @Test func issuedTokenRoundTripsWithExactPayload() throws {
    let issuer = TokenIssuer(secret: secret, issuer: "larder", audience: "dev")
    let token = issuer.issue(uid: "alice", claims: ["role": "admin", "sub": "ignored"], ttl: 3600, now: now)
    let parts = token.split(separator: ".").map(String.init)
    #expect(parts.count == 3)
    #expect(
      String(decoding: Base64URL.decode(parts[0]) ?? [], as: UTF8.self) == #"{"alg":"HS256","typ":"JWT"}"#)
    #expect(
      String(decoding: Base64URL.decode(parts[1]) ?? [], as: UTF8.self)
        == #"{"aud":"dev","exp":1700003600,"iat":1700000000,"iss":"larder","role":"admin","sub":"alice"}"#)
    // The signature matches OpenSSL's own HMAC of the signing input.
    #expect(Base64URL.decode(parts[2]) == (try tool.signHS256(parts[0] + "." + parts[1], secret: secret)))
    let verified = try verifier(issuer: "larder", audience: "dev").verify(token, now: now)
    #expect(verified.uid == "alice")
    #expect(verified.claims["role"] == "admin")
    #expect(verified.expiresAt == Date(timeIntervalSince1970: 1_700_003_600))
  }

  @Test func authorizationHeaderSchemes() {
    #expect(parseAuthorizationHeader("Bearer abc.def.ghi") == "abc.def.ghi")
    #expect(parseAuthorizationHeader("bearer abc") == "abc")
    #expect(parseAuthorizationHeader("BEARER   abc  ") == "abc")
    #expect(parseAuthorizationHeader("Firebase abc") == "abc")
    #expect(parseAuthorizationHeader("firebase\tabc") == "abc")
    #expect(parseAuthorizationHeader("Basic dXNlcjpwdw==") == nil)
    #expect(parseAuthorizationHeader("Bearer") == nil)
    #expect(parseAuthorizationHeader("Bearer ") == nil)
    #expect(parseAuthorizationHeader("Bearer a b") == nil)
    #expect(parseAuthorizationHeader("Bearerabc") == nil)
    #expect(parseAuthorizationHeader("") == nil)
  }

  @Test func oneVerifierIsSharedAcrossThreads() throws {
    let rs = TestJWT.signingInput(alg: "RS256", claims: claims)
    let es = TestJWT.signingInput(alg: "ES256", claims: claims)
    let tokens = [TestJWT.token(rs, try tool.signRS256(rs)), TestJWT.token(es, try tool.signES256(es))]
    let v = try verifier(keys: rsaKeys() + ecKeys())
    let now = self.now
    let verified = Mutex(0)
    DispatchQueue.concurrentPerform(iterations: 200) { i in
      if (try? v.verify(tokens[i % 2], now: now).uid) == "alice" { verified.withLock { $0 += 1 } }
    }
    #expect(verified.withLock { $0 } == 200)
  }

  @Test func errorCodesAndMessagesAreStable() {
    #expect(AuthError.invalidSignature.code == "invalid_signature")
    #expect(AuthError.unknownKey(kid: "k").message == #"no key with kid "k""#)
    #expect(
      AuthError.tokenTooLarge(size: 9000, maxSize: 8192).message
        == "token of 9000 bytes exceeds the limit of 8192 bytes")
    let long = String(repeating: "n", count: 100)
    #expect(
      AuthError.unsupportedAlgorithm(long).message == "unsupported token algorithm \""
        + String(repeating: "n", count: 40) + "…\"")
    #expect(AuthError.missingToken.code == "missing_token")
  }
}
