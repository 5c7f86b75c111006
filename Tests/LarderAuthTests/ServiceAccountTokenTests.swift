import Foundation
import LarderAuth
import LarderCrypto
import LarderTestSupport
import Testing

/// The JWT-bearer grant's assertion checks and service accounts' access tokens, with keys made by
/// LarderCrypto and cross-checked by `openssl`.
struct ServiceAccountTokenTests {
  static let key = try! PrivateKey.generateRSA()
  static let email = "backend@larder.iam.larder"
  static let audience = "http://127.0.0.1:8080/token"
  static let now = Date(timeIntervalSince1970: 1_800_000_000)

  /// An assertion as google-auth makes it (header kid = private_key_id, iss, aud, iat, exp, scope).
  static func assertion(
    key: PrivateKey = key, kid: String = "kid-1", claims: [String: JSONValue] = [:], alg: String = "RS256"
  ) throws -> String {
    var payload: [String: JSONValue] = [
      "iss": .string(email), "aud": .string(audience), "iat": .int(1_800_000_000), "exp": .int(1_800_003_600),
      "scope": "https://www.googleapis.com/auth/devstorage.full_control",
    ]
    for (k, v) in claims { payload[k] = v }
    let header: [String: JSONValue] = ["alg": .string(alg), "typ": "JWT", "kid": .string(kid)]
    let input =
      Base64URL.encode(JSONValue.serialize(header)) + "." + Base64URL.encode(JSONValue.serialize(payload))
    return input + "." + Base64URL.encode(try key.signRS256(Array(input.utf8)))
  }

  static func verify(_ assertion: String, key: PublicKey? = nil, now: Date = now) throws(AuthError)
    -> ServiceAccountAssertion
  {
    try ServiceAccountGrant.verify(
      assertion, key: key ?? (try! Self.key.publicKey()), clientEmail: email, audiences: [audience], now: now)
  }

  /// What the CLI signs with a key file is what `/token` verifies: kid, iss, aud (the key
  /// file's token_uri), an hour's window and the full-control scope.
  @Test func keyFileAssertionIsAcceptedByTheGrantCheck() throws {
    let file: [String: String] = [
      "type": "service_account", "private_key_id": "kid-1", "private_key": Self.key.pkcs8PEM(),
      "client_email": Self.email, "token_uri": Self.audience,
    ]
    let key = try ServiceAccountKeyFile(json: Array(try JSONSerialization.data(withJSONObject: file)))
    let assertion = try key.assertion(now: Self.now)
    #expect(try ServiceAccountGrant.keyID(of: assertion) == "kid-1")
    let grant = try Self.verify(assertion)
    #expect(grant.clientEmail == Self.email && grant.keyID == "kid-1")
    #expect(grant.scope == ServiceAccountKeyFile.fullControlScope)
    #expect(grant.expiresAt == Self.now.addingTimeInterval(3600))
    // Another key's signature is refused; so is a file that is not a service-account key.
    let other = try PrivateKey.generateRSA()
    #expect(throws: AuthError.invalidSignature) { try Self.verify(assertion, key: try other.publicKey()) }
    var broken = file
    broken["type"] = "authorized_user"
    #expect(throws: KeyFileError.notServiceAccount) {
      try ServiceAccountKeyFile(json: Array(try JSONSerialization.data(withJSONObject: broken)))
    }
    broken = file
    broken["private_key"] = nil
    #expect(throws: KeyFileError.missingField("private_key")) {
      try ServiceAccountKeyFile(json: Array(try JSONSerialization.data(withJSONObject: broken)))
    }
  }

  @Test func opensslReadsTheKeyAndVerifiesItsSignatures() throws {
    let openssl = OpenSSLTool.shared
    try openssl.run(["pkey", "-check", "-noout"], input: Array(Self.key.pkcs8PEM().utf8))
    let signature = try Self.key.signRS256(Array("signed by larder".utf8))
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sa-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    try Self.key.publicKeyPEM().write(
      to: dir.appendingPathComponent("pub"), atomically: true, encoding: .utf8)
    try Data(signature).write(to: dir.appendingPathComponent("sig"))
    let out = try openssl.run(
      [
        "dgst", "-sha256", "-verify", dir.appendingPathComponent("pub").path, "-signature",
        dir.appendingPathComponent("sig").path,
      ],
      input: Array("signed by larder".utf8))
    #expect(String(decoding: out, as: UTF8.self).contains("Verified OK"))
    // And the other way: openssl's key, read by LarderCrypto, signs what openssl's public key verifies.
    let theirs = try PrivateKey(pem: openssl.contents("rsa"))
    let publicKey = try KeyLoader.pem(openssl.contents("rsa.pub"))[0].key
    #expect(publicKey.verifyRS256(signature: try theirs.signRS256([1, 2, 3]), message: [1, 2, 3]))
    #expect(publicKey.verifyRS256(signature: try openssl.signRS256("abc"), message: Array("abc".utf8)))
  }

  @Test func aGoodAssertionIsGranted() throws {
    let grant = try Self.verify(Self.assertion())
    #expect(grant.clientEmail == Self.email)
    #expect(grant.keyID == "kid-1")
    #expect(grant.scope == "https://www.googleapis.com/auth/devstorage.full_control")
    #expect(try ServiceAccountGrant.keyID(of: Self.assertion(kid: "abc")) == "abc")
    // Within the leeway of a minute on either side.
    _ = try Self.verify(Self.assertion(), now: Self.now.addingTimeInterval(3600 + 59))
    _ = try Self.verify(Self.assertion(), now: Self.now.addingTimeInterval(-59))
  }

  @Test func badAssertionsAreRefused() throws {
    let other = try PrivateKey.generateRSA()
    #expect(throws: AuthError.invalidSignature) { try Self.verify(Self.assertion(key: other)) }
    #expect(throws: AuthError.invalidAudience) {
      try Self.verify(Self.assertion(claims: ["aud": "https://elsewhere.example/token"]))
    }
    #expect(throws: AuthError.invalidAudience) { try Self.verify(Self.assertion(claims: ["aud": nil])) }
    #expect(throws: AuthError.invalidIssuer) { try Self.verify(Self.assertion(claims: ["iss": "evil@x"])) }
    #expect(throws: AuthError.expired(expiresAt: Date(timeIntervalSince1970: 1_800_003_600))) {
      try Self.verify(Self.assertion(), now: Self.now.addingTimeInterval(3600 + 61))
    }
    #expect(throws: AuthError.notYetValid(validFrom: Self.now)) {
      try Self.verify(Self.assertion(), now: Self.now.addingTimeInterval(-61))
    }
    #expect(throws: AuthError.self) { try Self.verify(Self.assertion(claims: ["exp": .int(1_800_003_601)])) }
    #expect(throws: AuthError.self) { try Self.verify(Self.assertion(claims: ["scope": ""])) }
    #expect(throws: AuthError.self) { try Self.verify(Self.assertion(claims: ["scope": nil])) }
    #expect(throws: AuthError.self) { try Self.verify(Self.assertion(alg: "HS256")) }
    #expect(throws: AuthError.self) { try ServiceAccountGrant.keyID(of: "not a jwt") }
  }

  @Test func accessTokensVerifyOfflineWithTheStoreSecretOnly() throws {
    let secret = SecureRandom.bytes(32)
    let token = ServiceAccountAccessToken.issue(
      secret: secret, clientEmail: Self.email, keyID: "kid-1", scope: "s", now: Self.now)
    #expect(ServiceAccountAccessToken.isAccessToken(token))
    let verified = try ServiceAccountAccessToken.verify(
      token, secret: secret, now: Self.now.addingTimeInterval(3599))
    #expect(verified.clientEmail == Self.email)
    #expect(verified.keyID == "kid-1")
    #expect(throws: AuthError.expired(expiresAt: Self.now.addingTimeInterval(3600))) {
      try ServiceAccountAccessToken.verify(token, secret: secret, now: Self.now.addingTimeInterval(3601))
    }
    // Another store's token, and a plain HS256 token of this store, are not service accounts'.
    #expect(throws: AuthError.invalidSignature) {
      try ServiceAccountAccessToken.verify(token, secret: SecureRandom.bytes(32), now: Self.now)
    }
    let plain = TokenIssuer(secret: secret).issue(
      uid: Self.email, claims: ["larder_sa": .string(Self.email)], now: Self.now)
    #expect(!ServiceAccountAccessToken.isAccessToken(plain))
    #expect(throws: AuthError.invalidSignature) {
      try ServiceAccountAccessToken.verify(plain, secret: secret, now: Self.now)
    }
    // Nor does a service account's token pass the store's ordinary verifier.
    #expect(throws: AuthError.invalidSignature) {
      try JWTVerifier(hmacSecret: secret).verify(token, now: Self.now)
    }
  }
}
