import Foundation
import LarderAuth
import LarderHTTP

/// `POST /token`: the OAuth 2.0 JWT-bearer grant (RFC 7523) a service-account key file's
/// `token_uri` names, as google-auth makes it.
///
/// ```
/// POST /token  grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<RS256 JWT>
/// 200 {"access_token": "…", "expires_in": 3600, "token_type": "Bearer"}
/// 400 {"error": "invalid_grant", "error_description": "…"}
/// ```
/// The assertion's `kid` names the catalog's key, `iss` must be that key's account and `aud`
/// this server's token URL: the configured public URL's `/token` (without `--public-url`, the
/// address it listens on), or Google's (``googleTokenURL``), which google-auth (Python, and
/// firebase-admin through it) writes as `aud` whatever the key file's `token_uri` says
/// (google/oauth2/service_account.py, `_make_authorization_grant_assertion`). Accepting it
/// lets nothing else in: the key that signs is one this catalog issued, and only its server
/// takes assertions signed with it. The request's `Host` counts for nothing: an assertion made
/// out for another server must not be spent here. Each assertion is exchanged once (the
/// catalog remembers it until it expires), and its `scope` decides what the token may do
/// (``ServiceAccountScope``; an unknown scope is `invalid_scope`).
struct TokenEndpoint {
  let context: ServiceContext
  let accounts: ServiceAccounts

  func register(in router: inout Router) {
    router.add("POST", "/token", route: "token") { request, _ in
      .receiveBody(BufferedBodySink(limit: 16 * 1024) { body in grant(body, request: request) })
    }
  }

  /// An OAuth error answer (RFC 6749 §5.2).
  static func oauthError(_ error: String, _ description: String) -> HTTPResponse {
    var r = HTTPResponse.json(status: 400, ["error": error, "error_description": description])
    r.headers.set("Cache-Control", "no-store")
    return r
  }

  /// The `aud` google-auth always writes.
  static let googleTokenURL = "https://oauth2.googleapis.com/token"

  /// The token URLs an assertion may name as its audience.
  func audiences() -> Set<String> {
    var accepted: Set = [Self.googleTokenURL]
    if var base = context.publicURL, !base.isEmpty {
      while base.hasSuffix("/") { base.removeLast() }
      accepted.insert(base + "/token")
    } else {
      for url in context.listening.urls { accepted.insert(url + "/token") }
    }
    return accepted
  }

  func grant(_ body: [UInt8], request: HTTPRequest) -> HTTPResponse {
    // A form body: `+` is a space there, unlike in a query.
    let form = String(decoding: body, as: UTF8.self).replacingOccurrences(of: "+", with: "%20")
    guard let items = try? HTTPQueryItem.parse(form[...]) else {
      return Self.oauthError("invalid_request", "the body must be application/x-www-form-urlencoded")
    }
    func field(_ name: String) -> String? { items.first { $0.name == name }?.value }
    guard let grantType = field("grant_type") else {
      return Self.oauthError("invalid_request", "grant_type is required")
    }
    guard grantType == ServiceAccountGrant.grantType else {
      return Self.oauthError(
        "unsupported_grant_type",
        "only \(ServiceAccountGrant.grantType) (a service account's signed assertion) is supported")
    }
    guard let assertion = field("assertion"), !assertion.isEmpty else {
      return Self.oauthError("invalid_request", "assertion is required")
    }
    let log = context.logger.with(["request_id": request.id])
    do throws(AuthError) {
      let kid = try ServiceAccountGrant.keyID(of: assertion)
      guard let key = accounts.key(id: kid) else { throw AuthError.unknownKey(kid: kid) }
      let grant = try ServiceAccountGrant.verify(
        assertion, key: key.publicKey, clientEmail: key.record.clientEmail, audiences: audiences())
      let scope = try ServiceAccountScope(scopes: grant.scope)
      // Kept past `exp` by the verifier's leeway, during which the assertion still verifies.
      let now = Date()
      let first: Date?
      do {
        first = try context.larder.recordServiceAccountAssertion(
          id: grant.replayID, expiresAt: grant.expiresAt.addingTimeInterval(60), now: now)
      } catch {
        log.error("recording a service account assertion failed", metadata: ["error": "\(error)"])
        return HTTPResponse.json(
          status: 503, ["error": "temporarily_unavailable", "error_description": "the catalog is unavailable"])
      }
      // A repeat within the retry window gets the very token the first exchange got (tokens are
      // a function of their claims): google-cloud-storage refreshes one credential from two
      // threads at once, and both post the same assertion. Later, a repeat is a replay.
      let issuedAt = first ?? now
      guard Duration.seconds(now.timeIntervalSince(issuedAt)) <= context.assertionRetryWindow else {
        throw AuthError.replayedAssertion
      }
      let token = ServiceAccountAccessToken.issue(
        secret: accounts.secret, clientEmail: grant.clientEmail, keyID: grant.keyID, scope: grant.scope, now: issuedAt)
      let expiresIn = Int(ServiceAccountAccessToken.lifetime) - Int(now.timeIntervalSince(issuedAt).rounded(.down))
      log.info(
        "service account token issued",
        metadata: ["client_email": grant.clientEmail, "key_id": grant.keyID, "scope": scope.name])
      struct Answer: Encodable {
        let access_token: String
        let expires_in: Int
        let token_type: String
      }
      var r = HTTPResponse.json(
        Answer(access_token: token, expires_in: expiresIn, token_type: "Bearer")
      )
      r.headers.set("Cache-Control", "no-store")
      return r
    } catch {
      log.info("service account token refused", metadata: ["code": error.code])
      if case .invalidScope = error { return Self.oauthError("invalid_scope", error.message) }
      return Self.oauthError("invalid_grant", error.message)
    }
  }
}
