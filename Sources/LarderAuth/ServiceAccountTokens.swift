import Foundation
import LarderCrypto

/// What a verified JWT-bearer assertion (RFC 7523) says: which account asks, with which key,
/// for which scope.
public struct ServiceAccountAssertion: Sendable, Equatable {
  public var clientEmail: String
  public var keyID: String
  public var scope: String
  public var expiresAt: Date
  /// What names this assertion for replay checks: its `jti` with its issuer when it has one,
  /// else the SHA-256 of the whole assertion (google-auth sends no `jti`).
  public var replayID: String
}

/// What a service account's access token may do, from the OAuth scopes it was asked for (GCS's):
/// `devstorage.read_only` (and `cloud-platform.read-only`) reads, `devstorage.read_write` reads
/// and writes, `devstorage.full_control` and `cloud-platform` make the admin identity. The
/// other scopes firebase-admin asks for beside `cloud-platform` grant nothing here and are let
/// through; any other scope is refused, as Google's endpoint refuses one it does not know.
///
/// ```swift
/// try ServiceAccountScope(scopes: "https://www.googleapis.com/auth/devstorage.read_only")  // .readOnly
/// ```
public enum ServiceAccountScope: Int, Sendable, Comparable, CaseIterable {
  case readOnly, readWrite, fullControl

  static let prefix = "https://www.googleapis.com/auth/"
  /// Scope names (after ``prefix``) and what each grants; nil: known, grants no storage access.
  static let known: [String: ServiceAccountScope?] = [
    "devstorage.read_only": .readOnly, "devstorage.read_write": .readWrite,
    "devstorage.full_control": .fullControl, "cloud-platform": .fullControl, "cloud-platform.read-only": .readOnly,
    // firebase-admin's list (firebase_admin/credentials.py).
    "datastore": nil, "firebase": nil, "identitytoolkit": nil, "userinfo.email": nil, "firebase.database": nil,
  ]

  /// The most any of the space-separated `scopes` grants.
  /// - Throws: ``AuthError/invalidScope(_:)`` for an unknown scope, or when none grants storage access.
  public init(scopes: String) throws(AuthError) {
    var granted: ServiceAccountScope?
    for scope in scopes.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
      guard scope.hasPrefix(Self.prefix), let grant = Self.known[String(scope.dropFirst(Self.prefix.count))] else {
        throw .invalidScope("unknown scope \(AuthError.quote(String(scope)))")
      }
      if let grant { granted = max(granted ?? grant, grant) }
    }
    guard let granted else {
      throw .invalidScope("no scope grants storage access: ask for \(Self.prefix)devstorage.read_only, read_write or full_control")
    }
    self = granted
  }

  /// The scope as GCS names it.
  public var name: String {
    switch self {
    case .readOnly: "devstorage.read_only"
    case .readWrite: "devstorage.read_write"
    case .fullControl: "devstorage.full_control"
    }
  }

  public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// The OAuth 2.0 JWT-bearer grant as google-auth makes it: an RS256 JWT whose header `kid` is the
/// key file's `private_key_id`, `iss` its `client_email`, `aud` its `token_uri`, with `iat`,
/// `exp` (at most an hour apart) and `scope`.
///
/// ```swift
/// let kid = try ServiceAccountGrant.keyID(of: assertion)          // to find the catalog's key
/// let grant = try ServiceAccountGrant.verify(assertion, key: key, clientEmail: email,
///                                            audiences: ["https://files.example.com/token"])
/// ```
public enum ServiceAccountGrant {
  public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
  /// The longest `exp - iat` accepted, as Google's token endpoint allows.
  public static let maxLifetime: TimeInterval = 3600

  /// The header's `kid`, read before any signature check only to choose the key.
  /// - Throws: ``AuthError/malformedToken(_:)`` without a string `kid`.
  public static func keyID(of assertion: String) throws(AuthError) -> String {
    guard case .string(let kid)? = try header(of: assertion)["kid"], !kid.isEmpty else {
      throw .malformedToken("the assertion's header has no kid (the key file's private_key_id)")
    }
    return kid
  }

  /// Verifies the signature with `key` (RS256 only), then `iss` = `clientEmail`, `aud` one of
  /// `audiences`, the time window (with `leeway`) and the scope.
  /// - Throws: ``AuthError`` naming the first check that failed.
  public static func verify(
    _ assertion: String, key: PublicKey, clientEmail: String, audiences: Set<String>, now: Date = Date(),
    leeway: TimeInterval = 60
  ) throws(AuthError) -> ServiceAccountAssertion {
    let kid = try keyID(of: assertion)
    let verifier = JWTVerifier(
      hmacSecret: nil, publicKeys: [VerificationKey(kid: kid, key: key)], leeway: leeway)
    let (claims, algorithm) = try verifier.verifiedClaims(assertion)
    guard algorithm == .rs256 else { throw .unsupportedAlgorithm(algorithm.rawValue) }
    guard claims["iss"] == .string(clientEmail) else { throw .invalidIssuer }
    switch claims["aud"] {
    case .string(let aud)? where audiences.contains(aud): break
    case .array(let auds)? where auds.contains(where: { $0.stringValue.map(audiences.contains) == true }):
      break
    default: throw .invalidAudience
    }
    guard let exp = claims["exp"]?.numberValue, exp.isFinite, let iat = claims["iat"]?.numberValue,
      iat.isFinite
    else {
      throw .malformedToken("the assertion needs numeric iat and exp")
    }
    let expiresAt = Date(timeIntervalSince1970: exp)
    let issuedAt = Date(timeIntervalSince1970: iat)
    if now.timeIntervalSince(expiresAt) > leeway { throw .expired(expiresAt: expiresAt) }
    if issuedAt.timeIntervalSince(now) > leeway { throw .notYetValid(validFrom: issuedAt) }
    guard exp - iat <= maxLifetime, exp > iat else {
      throw .malformedToken("exp must be after iat and at most 3600 seconds later")
    }
    guard case .string(let scope)? = claims["scope"], !scope.trimmingCharacters(in: .whitespaces).isEmpty
    else {
      throw .malformedToken("the assertion has no scope")
    }
    let replayID: String
    if case .string(let jti)? = claims["jti"], !jti.isEmpty {
      replayID = "jti:" + Base64URL.encode(Digest.hash(.sha256, Array((clientEmail + "\n" + jti).utf8)))
    } else {
      replayID = "sha256:" + Base64URL.encode(Digest.hash(.sha256, Array(assertion.utf8)))
    }
    return ServiceAccountAssertion(
      clientEmail: clientEmail, keyID: kid, scope: scope, expiresAt: expiresAt, replayID: replayID)
  }

  static func header(of token: String) throws(AuthError) -> [String: JSONValue] {
    let bytes = Array(token.utf8.prefix(8192))
    guard let dot = bytes.firstIndex(of: UInt8(ascii: ".")),
      let decoded = Base64URL.decode(utf8: Array(bytes[..<dot])),
      let header = JSONValue.parseObject(decoded)
    else { throw .malformedToken("the header is not base64url JSON") }
    return header
  }
}

/// The access tokens `/token` answers: HS256 JWTs any node verifies offline, keyed by a key
/// derived from the catalog's token secret (so neither kind of token passes for the other), with
/// the header `kid` ``headerKeyID`` and the claims `larder_sa` (the account's email) and
/// `larder_sa_key` (the key that asked, checked against the catalog on use, so revoking a key
/// ends its tokens).
///
/// ```swift
/// let token = ServiceAccountAccessToken.issue(secret: secret, clientEmail: email, keyID: kid, scope: scope)
/// let who = try ServiceAccountAccessToken.verify(token, secret: secret)   // (email, key id)
/// ```
public enum ServiceAccountAccessToken {
  /// The header `kid` that marks a service account's access token.
  public static let headerKeyID = "larder-service-account-1"
  public static let lifetime: TimeInterval = 3600

  /// The HMAC key: HMAC-SHA256(token secret, a fixed label), never the secret itself.
  static func key(_ secret: [UInt8]) -> [UInt8] {
    HMAC.sha256(key: secret, message: Array("larder service-account access token v1".utf8))
  }

  public static func issue(
    secret: [UInt8], clientEmail: String, keyID: String, scope: String, ttl: TimeInterval = lifetime,
    now: Date = Date()
  ) -> String {
    let issuedAt = Int64(now.timeIntervalSince1970.rounded(.down))
    let payload: [String: JSONValue] = [
      "sub": .string(clientEmail), "larder_sa": .string(clientEmail), "larder_sa_key": .string(keyID),
      "scope": .string(scope), "iat": .int(issuedAt), "exp": .int(issuedAt + Int64(ttl.rounded(.down))),
    ]
    let header: [String: JSONValue] = ["alg": "HS256", "typ": "JWT", "kid": .string(headerKeyID)]
    let input =
      Base64URL.encode(JSONValue.serialize(header)) + "." + Base64URL.encode(JSONValue.serialize(payload))
    return input + "." + Base64URL.encode(HMAC.sha256(key: key(secret), message: Array(input.utf8)))
  }

  /// Whether `token` claims to be one (its header's `kid`); only ``verify(_:secret:now:)`` says it is.
  public static func isAccessToken(_ token: String) -> Bool {
    (try? ServiceAccountGrant.header(of: token)["kid"]) == .string(headerKeyID)
  }

  /// The account and key of a valid, unexpired access token of the store with `secret`.
  /// - Throws: ``AuthError``: a bad signature (another store's, or forged), expired, malformed.
  public static func verify(_ token: String, secret: [UInt8], now: Date = Date()) throws(AuthError) -> (
    clientEmail: String, keyID: String, token: VerifiedToken
  ) {
    let verified = try JWTVerifier(hmacSecret: key(secret), leeway: 0).verify(token, now: now)
    guard case .string(let email)? = verified.claims["larder_sa"],
      case .string(let kid)? = verified.claims["larder_sa_key"]
    else { throw .malformedToken("not a service account access token") }
    return (email, kid, verified)
  }
}
