import Foundation
import LarderCrypto

/// Issues HS256 tokens signed with the data directory's secret, for development
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
    payload["exp"] = .int(issuedAt + Int64(ttl.rounded(.down)))
    if let issuer { payload["iss"] = .string(issuer) }
    if let audience { payload["aud"] = .string(audience) }
    let header: [String: JSONValue] = ["alg": "HS256", "typ": "JWT"]
    let signingInput =
      Base64URL.encode(JSONValue.serialize(header)) + "." + Base64URL.encode(JSONValue.serialize(payload))
    let signature = HMAC.sha256(key: secret, message: Array(signingInput.utf8))
    return signingInput + "." + Base64URL.encode(signature)
  }
}
