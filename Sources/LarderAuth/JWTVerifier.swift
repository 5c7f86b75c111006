import Foundation
import LarderCrypto

/// Verifies compact JWS bearer tokens (HS256 with the store's secret, RS256/ES256 with
/// configured public keys) and checks their claims.
///
/// ```swift
/// let verifier = JWTVerifier(hmacSecret: try LarderService.tokenSecret(of: larder),
///                            publicKeys: try KeyLoader.jwksFile(at: jwksURL), issuer: "https://idp.example")
/// let token = try verifier.verify(bearer)   // throws(AuthError)
/// request.auth = (uid: token.uid, token: token.claims)
/// ```
/// The order of checks limits what an attacker can make the server do: the size first, then the
/// header alone (to pick a key), then the signature, and only a signed payload is parsed as claims.
/// The header's `alg` selects the key *type* (HS256 → the secret only; RS256 → RSA keys only; ES256
/// → P-256 keys only), so a public key can never be used as an HMAC secret. Embedded keys (`jwk`,
/// `jku`, `x5u`, `x5c`) are ignored, and a `crit` header is refused since no extension is understood.
public struct JWTVerifier: Sendable {
  /// The HS256 secret; nil refuses HS256 tokens.
  public let hmacSecret: [UInt8]?
  public let publicKeys: [VerificationKey]
  /// When set, `iss` must equal it.
  public let issuer: String?
  /// When set, `aud` (a string or an array of strings) must contain it.
  public let audience: String?
  /// Clock skew allowed on `exp`, `nbf` and `iat`, in seconds.
  public let leeway: TimeInterval
  /// Tokens longer than this (in bytes) are refused before decoding.
  public let maxTokenSize: Int

  public init(
    hmacSecret: [UInt8]?, publicKeys: [VerificationKey] = [], issuer: String? = nil, audience: String? = nil,
    leeway: TimeInterval = 60, maxTokenSize: Int = 8192
  ) {
    self.hmacSecret = hmacSecret
    self.publicKeys = publicKeys
    self.issuer = issuer
    self.audience = audience
    self.leeway = leeway
    self.maxTokenSize = maxTokenSize
  }

  /// Verifies `token` at time `now`.
  /// - Throws: `AuthError` naming the first check that failed.
  public func verify(_ token: String, now: Date = Date()) throws(AuthError) -> VerifiedToken {
    let (claims, algorithm) = try verifiedClaims(token)
    return try check(claims, algorithm: algorithm, now: now)
  }

  /// The payload of a token whose signature verifies, before any claim is checked.
  func verifiedClaims(_ token: String) throws(AuthError) -> ([String: JSONValue], JWTAlgorithm) {
    let bytes = Array(token.utf8)
    guard bytes.count <= maxTokenSize else { throw .tokenTooLarge(size: bytes.count, maxSize: maxTokenSize) }
    let segments = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
    guard segments.count == 3 else {
      throw .malformedToken("expected 3 dot-separated segments, found \(segments.count)")
    }
    guard let headerBytes = Base64URL.decode(utf8: Array(segments[0])) else {
      throw .malformedToken("header is not base64url")
    }
    guard let header = JSONValue.parseObject(headerBytes) else {
      throw .malformedToken("header is not a JSON object")
    }
    guard let signature = Base64URL.decode(utf8: Array(segments[2])) else {
      throw .malformedToken("signature is not base64url")
    }
    guard case .string(let alg)? = header["alg"] else { throw .malformedToken("header has no alg") }
    guard let algorithm = JWTAlgorithm(rawValue: alg) else { throw .unsupportedAlgorithm(alg) }
    if header["crit"] != nil { throw .malformedToken("crit header extensions are not supported") }
    let kid: String?
    switch header["kid"] {
    case nil: kid = nil
    case .string(let s)?: kid = s
    default: throw .malformedToken("kid is not a string")
    }

    // The signing input is the ASCII text of the first two segments, exactly as received.
    let signingInput = Array(bytes[0..<(segments[0].count + 1 + segments[1].count)])
    guard try signatureVerifies(signature, signingInput, algorithm: algorithm, kid: kid) else {
      throw .invalidSignature
    }

    guard let payloadBytes = Base64URL.decode(utf8: Array(segments[1])) else {
      throw .malformedToken("payload is not base64url")
    }
    guard let claims = JSONValue.parseObject(payloadBytes) else {
      throw .malformedToken("payload is not a JSON object")
    }
    return (claims, algorithm)
  }

  private func signatureVerifies(
    _ signature: [UInt8], _ input: [UInt8], algorithm: JWTAlgorithm, kid: String?
  )
    throws(AuthError) -> Bool
  {
    switch algorithm {
    case .hs256:
      guard let hmacSecret else { throw .unsupportedAlgorithm("HS256") }
      return constantTimeEquals(HMAC.sha256(key: hmacSecret, message: input), signature)
    case .rs256, .es256:
      let ofType = publicKeys.filter { $0.algorithm == algorithm }
      guard !ofType.isEmpty else { throw .unsupportedAlgorithm(algorithm.rawValue) }
      // A kid that names a key selects it; keys loaded without a kid accept any kid; a kid naming
      // no key, when only keys with other kids exist, is refused outright.
      var candidates = ofType.filter { kid != nil && $0.kid == kid }
      if candidates.isEmpty { candidates = ofType.filter { $0.kid == nil } }
      if candidates.isEmpty && kid == nil { candidates = ofType }
      guard !candidates.isEmpty else { throw .unknownKey(kid: kid) }
      return candidates.contains { candidate in
        algorithm == .rs256
          ? candidate.key.verifyRS256(signature: signature, message: input)
          : candidate.key.verifyES256(rawSignature: signature, message: input)
      }
    }
  }

  private func check(_ claims: [String: JSONValue], algorithm: JWTAlgorithm, now: Date) throws(AuthError)
    -> VerifiedToken
  {
    func time(_ name: String) throws(AuthError) -> Date? {
      guard let value = claims[name] else { return nil }
      guard let seconds = value.numberValue, seconds.isFinite else {
        throw .malformedToken("\(name) is not a number")
      }
      return Date(timeIntervalSince1970: seconds)
    }
    guard let expiresAt = try time("exp") else { throw .malformedToken("token has no exp") }
    if now.timeIntervalSince(expiresAt) > leeway { throw .expired(expiresAt: expiresAt) }
    if let notBefore = try time("nbf"), notBefore.timeIntervalSince(now) > leeway {
      throw .notYetValid(validFrom: notBefore)
    }
    if let issuedAt = try time("iat"), issuedAt.timeIntervalSince(now) > leeway {
      throw .notYetValid(validFrom: issuedAt)
    }
    if let issuer, claims["iss"] != .string(issuer) { throw .invalidIssuer }
    if let audience {
      switch claims["aud"] {
      case .string(let aud)? where aud == audience: break
      case .array(let auds)? where auds.contains(.string(audience)): break
      default: throw .invalidAudience
      }
    }
    guard case .string(let sub)? = claims["sub"], !sub.isEmpty else { throw .missingSubject }
    return VerifiedToken(uid: sub, claims: claims, expiresAt: expiresAt, algorithm: algorithm)
  }
}
