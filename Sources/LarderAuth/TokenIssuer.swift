import Foundation
import LarderCrypto

/// Issues HS256 tokens signed with the store's secret (the catalog's `token_secret`), for development
/// (`larder token --uid U`) and tests.
///
/// ```swift
/// let token = TokenIssuer(secret: secret).issue(uid: "alice", claims: ["admin": true], ttl: 3600)
/// ```
public struct TokenIssuer: Sendable {
  public let secret: [UInt8]
  /// Written as `iss` when set, so the token passes a verifier that requires an issuer.
  public let issuer: String?
  /// Written as `aud` when set.
  public let audience: String?

  public init(secret: [UInt8], issuer: String? = nil, audience: String? = nil) {
    self.secret = secret
    self.issuer = issuer
    self.audience = audience
  }

  /// `issuedAt + ttl` in whole seconds, saturating at Int64's ends (a NaN ttl counts as 0), so an
  /// absurd ttl gives a token that never expires (or always has) instead of a trap.
  static func expiry(issuedAt: Int64, ttl: TimeInterval) -> Int64 {
    let seconds = ttl.rounded(.down)
    guard !seconds.isNaN else { return issuedAt }
    let lifetime = Int64(exactly: seconds) ?? (seconds < 0 ? .min : .max)
    let (sum, overflow) = issuedAt.addingReportingOverflow(lifetime)
    return overflow ? (lifetime < 0 ? .min : .max) : sum
  }

  /// A compact HS256 JWT with `sub` = `uid`, `iat` = `now` and `exp` = `now + ttl` (whole seconds);
  /// these, and `iss`/`aud` when configured, override the same names in `claims`.
  public func issue(
    uid: String, claims: [String: JSONValue] = [:], ttl: TimeInterval = 3600, now: Date = Date()
  )
    -> String
  {
    var payload = claims
    let issuedAt = Int64(now.timeIntervalSince1970.rounded(.down))
    payload["sub"] = .string(uid)
    payload["iat"] = .int(issuedAt)
    payload["exp"] = .int(Self.expiry(issuedAt: issuedAt, ttl: ttl))
    if let issuer { payload["iss"] = .string(issuer) }
    if let audience { payload["aud"] = .string(audience) }
    let header: [String: JSONValue] = ["alg": "HS256", "typ": "JWT"]
    let signingInput =
      Base64URL.encode(JSONValue.serialize(header)) + "." + Base64URL.encode(JSONValue.serialize(payload))
    let signature = HMAC.sha256(key: secret, message: Array(signingInput.utf8))
    return signingInput + "." + Base64URL.encode(signature)
  }
}
