import Foundation
import LarderAuth
import LarderCrypto
import LarderLogging
import LarderServer
import LarderTestSupport
import Testing

/// Service accounts on a live server (127.0.0.1, port 0) enforcing `storage.rules.example`:
/// `POST /token`, its access tokens as admin identities, and V4 signed URLs.
@Suite struct ServiceAccountServerTests {
  static let publicURL = "http://larder.test"
  static let scope = "https://www.googleapis.com/auth/devstorage.full_control"
  /// Anonymous and user writes here are denied by the example rules (no rule matches `secret/`).
  static let deniedPath = "/v0/b/app/o?name=secret%2Fadmin.txt"

  struct Account {
    let email: String
    let kid: String
    let key: PrivateKey
  }

  /// A live rules server, with keys re-read from the catalog on every use, and one account.
  func withAccount(
    window: Duration = .seconds(5), _ body: (LiveService, Account, MemoryLogHandler) throws -> Void
  ) throws {
    let log = MemoryLogHandler()
    try withRulesService(configure: {
      $0.serviceAccountKeyCacheTTL = .zero
      $0.assertionRetryWindow = window
      $0.publicURL = Self.publicURL
      $0.logger = Logger(label: "test", handler: log)
    }) { s in
      let created = try ServiceAccounts.create(
        name: "backend", publicURL: Self.publicURL, in: s.service.larder)
      #expect(created.keyFile["type"] == "service_account")
      #expect(created.keyFile["token_uri"] == Self.publicURL + "/token")
      #expect(created.keyFile["client_email"] == "backend@larder.iam.larder")
      let key = try PrivateKey(pem: Array(created.keyFile["private_key"]!.utf8))
      try body(s, Account(email: created.record.clientEmail, kid: created.record.keyID, key: key), log)
    }
  }

  static func assertion(
    _ account: Account, key: PrivateKey? = nil, aud: String = publicURL + "/token", iat: Date = Date(),
    lifetime: Int64 = 3600, scope: String = scope, jti: String? = UUID().uuidString
  ) throws -> String {
    let issuedAt = Int64(iat.timeIntervalSince1970)
    var payload: [String: JSONValue] = [
      "iss": .string(account.email), "aud": .string(aud), "iat": .int(issuedAt),
      "exp": .int(issuedAt + lifetime),
      "scope": .string(scope),
    ]
    // Each assertion is accepted once: a fresh jti makes each one new (google-auth sends none,
    // and differs by its iat instead).
    if let jti { payload["jti"] = .string(jti) }
    let header: [String: JSONValue] = ["alg": "RS256", "typ": "JWT", "kid": .string(account.kid)]
    let input =
      Base64URL.encode(JSONValue.serialize(header)) + "." + Base64URL.encode(JSONValue.serialize(payload))
    return input + "." + Base64URL.encode(try (key ?? account.key).signRS256(Array(input.utf8)))
  }

  static func tokenRequest(_ assertion: String, grantType: String = ServiceAccountGrant.grantType)
    -> WireRequest
  {
    let body = "grant_type=\(GoogleV4Signing.encode(grantType))&assertion=\(assertion)"
    return WireRequest(
      "POST", "/token", headers: [("Content-Type", "application/x-www-form-urlencoded")],
      body: Array(body.utf8))
  }

  func accessToken(_ s: LiveService, _ account: Account, scope: String = scope) throws -> String {
    let r = try s.send(Self.tokenRequest(try Self.assertion(account, scope: scope)))
    #expect(r.status == 200, "\(r.text)")
    #expect(r.json?["token_type"] as? String == "Bearer")
    #expect(r.json?["expires_in"] as? Int == 3600)
    #expect(r["Cache-Control"] == "no-store")
    return try #require(r.json?["access_token"] as? String)
  }

  func expectInvalidGrant(
    _ r: WireResponse, _ label: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    #expect(r.status == 400, "\(label): \(r.status) \(r.text)", sourceLocation: sourceLocation)
    #expect(r.json?["error"] as? String == "invalid_grant", "\(label)", sourceLocation: sourceLocation)
    #expect(r.json?["error_description"] is String, "\(label)", sourceLocation: sourceLocation)
  }

  @Test func tokenEndpointGrantsGoodAssertionsOnly() throws {
    try withAccount { s, account, _ in
      _ = try accessToken(s, account)
      // Google's fixed aud is accepted; the URL the request's Host makes (Wire sends
      // `Host: 127.0.0.1`) is not: the public URL is larder.test (issue 37).
      expectInvalidGrant(
        try s.send(Self.tokenRequest(try Self.assertion(account, aud: "http://127.0.0.1/token"))),
        "an audience made from the Host header")
      #expect(
        try s.send(Self.tokenRequest(try Self.assertion(account, aud: "https://oauth2.googleapis.com/token")))
          .status
          == 200)
      expectInvalidGrant(
        try s.send(Self.tokenRequest(try Self.assertion(account, key: try PrivateKey.generateRSA()))),
        "wrong key")
      expectInvalidGrant(
        try s.send(Self.tokenRequest(try Self.assertion(account, aud: "https://elsewhere.example/token"))),
        "wrong aud")
      expectInvalidGrant(
        try s.send(Self.tokenRequest(try Self.assertion(account, iat: Date().addingTimeInterval(-7300)))),
        "expired")
      expectInvalidGrant(
        try s.send(Self.tokenRequest(try Self.assertion(account, lifetime: 7200))), "lifetime over an hour")
      let unknown = Account(email: account.email, kid: "no-such-key", key: account.key)
      expectInvalidGrant(try s.send(Self.tokenRequest(try Self.assertion(unknown))), "unknown kid")
      let wrongGrant = try s.send(
        Self.tokenRequest(try Self.assertion(account), grantType: "client_credentials"))
      #expect(wrongGrant.status == 400)
      #expect(wrongGrant.json?["error"] as? String == "unsupported_grant_type")
      let noAssertion = try s.send(WireRequest("POST", "/token", body: Array("grant_type=x".utf8)))
      #expect(noAssertion.status == 400)
    }
  }

  @Test func accessTokensAreAdminIdentitiesEverywhereAndLogged() throws {
    try withAccount { s, account, log in
      let token = try accessToken(s, account)
      let auth = [("Authorization", "Bearer \(token)"), ("X-Request-Id", "sa-upload-1")]
      // Denied by the rules for anonymous callers and for users; allowed for the service account.
      #expect(try s.send(WireRequest("POST", Self.deniedPath, body: [1, 2, 3])).status == 403)
      let alice = s.service.developmentToken(uid: "alice")
      #expect(
        try s.send(
          WireRequest("POST", Self.deniedPath, headers: [("Authorization", "Bearer \(alice)")], body: [1])
        )
        .status == 403)
      // A store token claiming to be the account (as `larder token --claim larder_sa=…` makes) is a user's.
      let forged = TokenIssuer(secret: s.service.secret).issue(
        uid: account.email,
        claims: ["larder_sa": .string(account.email), "larder_sa_key": .string(account.kid)])
      #expect(
        try s.send(
          WireRequest("POST", Self.deniedPath, headers: [("Authorization", "Bearer \(forged)")], body: [1])
        )
        .status == 403)
      let up = try s.send(WireRequest("POST", Self.deniedPath, headers: auth, body: [1, 2, 3]))
      #expect(up.status == 200, "\(up.text)")
      let down = try s.send(
        .get("/v0/b/app/o/secret%2Fadmin.txt?alt=media", [("Authorization", "Bearer \(token)")]))
      #expect(down.body == [1, 2, 3])
      #expect(try s.send(.get("/v0/b/app/o/secret%2Fadmin.txt?alt=media")).status == 403)
      let list = try s.send(.get("/v0/b/app/o?prefix=secret%2F", [("Authorization", "Bearer \(token)")]))
      #expect(list.status == 200)
      // tus, through the same authenticator and policy.
      let tus = try s.send(
        WireRequest(
          "POST", "/v0/b/app/uploads",
          headers: [
            ("Authorization", "Bearer \(token)"), ("Tus-Resumable", "1.0.0"), ("Upload-Length", "2"),
            ("Upload-Metadata", "name \(Data("secret/tus.bin".utf8).base64EncodedString())"),
          ]))
      #expect(tus.status == 201, "\(tus.text)")
      let logged = log.records.filter { $0.metadata["request_id"] == "sa-upload-1" }
      #expect(
        logged.contains {
          $0.message == "service account request" && $0.metadata["client_email"] == account.email
        })
    }
  }

  @Test func revokingAKeyEndsItsTokensAndGrants() throws {
    try withAccount { s, account, _ in
      let token = try accessToken(s, account)
      let auth = [("Authorization", "Bearer \(token)")]
      #expect(try s.send(WireRequest("POST", Self.deniedPath, headers: auth, body: [1])).status == 200)
      #expect(try s.service.larder.revokeServiceAccountKeys(matching: "backend").count == 1)
      let refused = try s.send(WireRequest("POST", Self.deniedPath, headers: auth, body: [1]))
      #expect(refused.status == 401, "\(refused.text)")
      expectInvalidGrant(try s.send(Self.tokenRequest(try Self.assertion(account))), "revoked key")
    }
  }

  @Test func accessTokensOfAnotherStoreAreRefused() throws {
    try withAccount { s, account, _ in
      let foreign = ServiceAccountAccessToken.issue(
        secret: SecureRandom.bytes(32), clientEmail: account.email, keyID: account.kid, scope: Self.scope)
      let r = try s.send(
        WireRequest("POST", Self.deniedPath, headers: [("Authorization", "Bearer \(foreign)")], body: [1]))
      #expect(r.status == 401)
    }
  }

  // MARK: signed URLs

  /// A V4 signed URL's target (path and query), signed for `Host: 127.0.0.1` as Wire sends it;
  /// `extra` parameters (an image variant's) are signed with the rest.
  static func signed(
    _ method: String, _ bucket: String, _ name: String, account: Account, key: PrivateKey? = nil,
    expires: Int = 600,
    at date: Date = Date(), extra: [(name: String, value: String)] = []
  ) throws -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "UTC")
    formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
    let timestamp = formatter.string(from: date)
    let scope = "\(timestamp.prefix(8))/auto/storage/goog4_request"
    let query: [(name: String, value: String)] = [
      ("X-Goog-Algorithm", "GOOG4-RSA-SHA256"), ("X-Goog-Credential", "\(account.email)/\(scope)"),
      ("X-Goog-Date", timestamp), ("X-Goog-Expires", String(expires)), ("X-Goog-SignedHeaders", "host"),
    ] + extra
    let canonical = GoogleV4Signing.canonicalRequest(
      method: method, path: "/\(bucket)/\(name)", query: query, headers: [("host", "127.0.0.1")])
    let toSign = GoogleV4Signing.stringToSign(
      timestamp: timestamp, credentialScope: scope, canonicalRequest: canonical)
    let signature = Hex.encode(try (key ?? account.key).signRS256(Array(toSign.utf8)))
    let encodedQuery = query.map { GoogleV4Signing.encode($0.name) + "=" + GoogleV4Signing.encode($0.value) }
    return "/\(bucket)/\(GoogleV4Signing.encode(name, keepingSlashes: true))?"
      + encodedQuery.joined(separator: "&") + "&X-Goog-Signature=\(signature)"
  }

  func expectForbidden(_ r: WireResponse, _ label: String, sourceLocation: SourceLocation = #_sourceLocation)
  {
    #expect(r.status == 403, "\(label): \(r.status) \(r.text)", sourceLocation: sourceLocation)
    #expect((r.error?["message"] as? String)?.isEmpty == false, "\(label)", sourceLocation: sourceLocation)
  }

  @Test func signedURLsUploadAndDownloadWithoutAToken() throws {
    try withAccount { s, account, _ in
      let name = "secret/signed file+ü.txt"
      let put = try s.send(
        WireRequest("PUT", try Self.signed("PUT", "app", name, account: account), body: Array("hello".utf8)))
      #expect(put.status == 200, "\(put.text)")
      #expect(put.json?["name"] as? String == name)
      let get = try s.send(.get(try Self.signed("GET", "app", name, account: account)))
      #expect(get.status == 200)
      #expect(get.text == "hello")
      // The download path's own features: Range.
      let ranged = try s.send(
        .get(try Self.signed("GET", "app", name, account: account), [("Range", "bytes=1-3")]))
      #expect(ranged.status == 206)
      #expect(ranged.text == "ell")
      let head = try s.send(.head(try Self.signed("HEAD", "app", name, account: account)))
      #expect(head.status == 200)
      #expect(head["Content-Length"] == "5")
      // The same object through the Firebase API (admin write, visible to the service account).
      #expect(try s.send(.get("/v0/b/app/o/secret%2Fsigned%20file%2B%C3%BC.txt?alt=media")).status == 403)
      // Without X-Goog-Signature the path is no route at all.
      #expect(try s.send(.get("/app/secret/x")).status == 404)
    }
  }

  @Test func tamperedExpiredAndRevokedSignedURLsAre403() throws {
    try withAccount { s, account, _ in
      let put = try s.send(
        WireRequest("PUT", try Self.signed("PUT", "app", "secret/a.txt", account: account), body: [1]))
      #expect(put.status == 200)
      let good = try Self.signed("GET", "app", "secret/a.txt", account: account)
      #expect(try s.send(.get(good)).status == 200)
      expectForbidden(
        try s.send(.get(good.replacingOccurrences(of: "secret/a.txt", with: "secret/b.txt"))), "path")
      expectForbidden(
        try s.send(.get(good.replacingOccurrences(of: "X-Goog-Expires=600", with: "X-Goog-Expires=601"))),
        "expiry")
      expectForbidden(try s.send(WireRequest("PUT", good, body: [2])), "GET URL used to PUT")
      let expired = try Self.signed(
        "GET", "app", "secret/a.txt", account: account, expires: 60, at: Date().addingTimeInterval(-120))
      let e = try s.send(.get(expired))
      expectForbidden(e, "expired")
      #expect((e.error?["message"] as? String)?.contains("expired") == true)
      expectForbidden(
        try s.send(
          .get(
            try Self.signed("GET", "app", "secret/a.txt", account: account, key: try PrivateKey.generateRSA())
          )),
        "other key")
      let stranger = Account(email: "nobody@larder.iam.larder", kid: account.kid, key: account.key)
      expectForbidden(
        try s.send(.get(try Self.signed("GET", "app", "secret/a.txt", account: stranger))), "unknown")
      _ = try s.service.larder.revokeServiceAccountKeys(matching: account.email)
      let revoked = try s.send(.get(good))
      expectForbidden(revoked, "revoked")
      #expect((revoked.error?["message"] as? String)?.contains("revoked") == true)
    }
  }

  /// The JSON API's root (`/b/{bucket}/o/…`) is declared after the signed URLs: a signed URL of
  /// a bucket named `b` whose object looks like a JSON API path stays a signed URL.
  @Test func aSignedURLOfABucketNamedBIsNotTheRootJSONAPI() throws {
    try withAccount { s, account, _ in
      for name in ["app/o/x.txt", "app/o", "x"] {
        let put = try s.send(
          WireRequest(
            "PUT", try Self.signed("PUT", "b", name, account: account), body: Array("signed \(name)".utf8)))
        #expect(put.status == 200, "\(name): \(put.text)")
        #expect(put.json?["bucket"] as? String == "b")
        #expect(put.json?["name"] as? String == name)
        let get = try s.send(.get(try Self.signed("GET", "b", name, account: account)))
        #expect(get.text == "signed \(name)", "\(name)")
      }
      // A signed URL's refusal keeps its own shape there (not the JSON API's `errors` list).
      let good = try Self.signed("GET", "b", "app/o/x.txt", account: account)
      let bad = try s.send(.get(good.replacingOccurrences(of: "x.txt", with: "y.txt")))
      expectForbidden(bad, "tampered")
      #expect(bad.error?["errors"] == nil)
      // Nothing was written into bucket `app` by those URLs.
      #expect(try s.send(.get("/storage/v1/b/app/o/x.txt", [("Authorization", "Bearer none")])).status != 200)
    }
  }

  @Test func eachAssertionIsExchangedOnce() throws {
    try withAccount(window: .zero) { s, account, _ in
      for jti in [String?.some("once"), nil] {
        let assertion = try Self.assertion(account, jti: jti)
        #expect(try s.send(Self.tokenRequest(assertion)).status == 200)
        let again = try s.send(Self.tokenRequest(assertion))
        expectInvalidGrant(again, "the same assertion again (jti \(jti ?? "none"))")
        #expect(again.json?["error_description"] as? String == AuthError.replayedAssertion.message)
      }
      // Another assertion with the same jti from the same account is a replay too.
      expectInvalidGrant(
        try s.send(Self.tokenRequest(try Self.assertion(account, aud: "https://oauth2.googleapis.com/token", jti: "once"))),
        "a reused jti")
    }
  }

  /// google-cloud-storage refreshes one credential from two threads at once (a download and its
  /// metadata), posting one assertion twice: within the retry window both get the same token.
  @Test func aRepeatWithinTheRetryWindowGetsTheSameToken() throws {
    try withAccount { s, account, _ in
      let assertion = try Self.assertion(account, jti: nil)
      let answers = try [s.send(Self.tokenRequest(assertion)), s.send(Self.tokenRequest(assertion))]
      #expect(answers.map(\.status) == [200, 200])
      let tokens = answers.map { $0.json?["access_token"] as? String }
      #expect(tokens[0] != nil && tokens[0] == tokens[1])
    }
  }

  @Test func withoutAPublicURLTheAudienceIsTheAddressListenedOn() throws {
    try withRulesService(configure: { $0.serviceAccountKeyCacheTTL = .zero }) { s in
      let created = try ServiceAccounts.create(name: "backend", publicURL: "http://127.0.0.1:\(s.port)", in: s.service.larder)
      let key = try PrivateKey(pem: Array(created.keyFile["private_key"]!.utf8))
      let account = Account(email: created.record.clientEmail, kid: created.record.keyID, key: key)
      for url in ["http://127.0.0.1:\(s.port)", "http://localhost:\(s.port)"] {
        #expect(try s.send(Self.tokenRequest(try Self.assertion(account, aud: url + "/token"))).status == 200, "\(url)")
      }
      for url in ["http://127.0.0.1", "http://127.0.0.1:\(s.port + 1)", "https://larder.test", "http://evil.example"] {
        expectInvalidGrant(try s.send(Self.tokenRequest(try Self.assertion(account, aud: url + "/token"))), url)
      }
    }
  }

  static func scopes(_ names: String...) -> String {
    names.map { "https://www.googleapis.com/auth/" + $0 }.joined(separator: " ")
  }

  @Test func scopesDecideWhatATokenMayDo() throws {
    try withAccount { s, account, _ in
      let admin = [("Authorization", "Bearer \(try accessToken(s, account))")]
      #expect(try s.send(WireRequest("POST", Self.deniedPath, headers: admin, body: [1, 2, 3])).status == 200)
      let object = "/v0/b/app/o/secret%2Fadmin.txt"

      let reader = [("Authorization", "Bearer \(try accessToken(s, account, scope: Self.scopes("devstorage.read_only")))")]
      let read = try s.send(.get(object + "?alt=media", reader))
      #expect(read.status == 200 && read.body == [1, 2, 3], "\(read.status)")
      #expect(try s.send(.get("/storage/v1/b/app/o?prefix=secret%2F", reader)).status == 200)
      #expect(try s.send(WireRequest("POST", Self.deniedPath, headers: reader, body: [9])).status == 403, "read_only uploaded")
      #expect(try s.send(WireRequest("DELETE", object, headers: reader)).status == 403, "read_only deleted")
      #expect(try s.send(.get(object + "?alt=media", reader)).body == [1, 2, 3])
      #expect(try s.send(.get("/admin/v1/store", reader)).status == 403)

      let writer = [("Authorization", "Bearer \(try accessToken(s, account, scope: Self.scopes("devstorage.read_write")))")]
      #expect(try s.send(WireRequest("POST", Self.deniedPath, headers: writer, body: [4])).status == 200)
      #expect(try s.send(.get("/admin/v1/store", writer)).status == 403, "read_write is not the admin identity")
      #expect(try s.send(WireRequest("DELETE", object, headers: writer)).status == 204)

      // firebase-admin's list: cloud-platform among scopes that grant nothing here.
      let firebaseAdmin = Self.scopes(
        "cloud-platform", "datastore", "devstorage.read_write", "firebase", "identitytoolkit", "userinfo.email")
      let full = [("Authorization", "Bearer \(try accessToken(s, account, scope: firebaseAdmin))")]
      #expect(try s.send(.get("/admin/v1/store", full)).status == 200)

      for bad in [Self.scopes("devstorage.read_only", "drive"), "devstorage.read_only", Self.scopes("userinfo.email")] {
        let r = try s.send(Self.tokenRequest(try Self.assertion(account, scope: bad)))
        #expect(r.status == 400, "\(bad)")
        #expect(r.json?["error"] as? String == "invalid_scope", "\(bad): \(r.text)")
      }
    }
  }
}
