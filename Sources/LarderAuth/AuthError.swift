import Foundation

/// Why a bearer token was refused. The HTTP layer answers every case with 401 and a JSON body of
/// `code` and `message`; `code` is stable, `message` is for people and never echoes more than a
/// short, truncated piece of the token.
public enum AuthError: Error, Sendable, Equatable {
  /// No usable `Authorization` header (absent, or not `Bearer`/`Firebase`).
  case missingToken
  /// The token is longer than the verifier accepts, checked before any decoding.
  case tokenTooLarge(size: Int, maxSize: Int)
  /// Not three base64url segments of JSON objects, or a claim of the wrong type.
  case malformedToken(String)
  /// `alg` is `none`, unknown, or not configured (e.g. RS256 with no public keys).
  case unsupportedAlgorithm(String)
  /// No configured key matches the token's `kid` and algorithm.
  case unknownKey(kid: String?)
  /// The signature does not verify: tampered, or signed by another key.
  case invalidSignature
  /// `exp` (plus leeway) is in the past.
  case expired(expiresAt: Date)
  /// `nbf` or `iat` (minus leeway) is in the future.
  case notYetValid(validFrom: Date)
  /// `iss` is missing or not the configured issuer.
  case invalidIssuer
  /// `aud` is missing or does not contain the configured audience.
  case invalidAudience
  /// `sub` is missing, empty or not a string; it becomes `request.auth.uid`, so it is required.
  case missingSubject
  /// A service account's assertion asks for a scope this server does not know, or for none
  /// that grants storage access (OAuth's `invalid_scope`).
  case invalidScope(String)
  /// A service account's assertion was exchanged for a token already.
  case replayedAssertion

  /// A stable machine-readable code.
  public var code: String {
    switch self {
    case .missingToken: "missing_token"
    case .tokenTooLarge: "token_too_large"
    case .malformedToken: "malformed_token"
    case .unsupportedAlgorithm: "unsupported_algorithm"
    case .unknownKey: "unknown_key"
    case .invalidSignature: "invalid_signature"
    case .expired: "token_expired"
    case .notYetValid: "token_not_yet_valid"
    case .invalidIssuer: "invalid_issuer"
    case .invalidAudience: "invalid_audience"
    case .missingSubject: "missing_subject"
    case .invalidScope: "invalid_scope"
    case .replayedAssertion: "replayed_assertion"
    }
  }

  /// A short human explanation.
  public var message: String {
    switch self {
    case .missingToken: "an Authorization: Bearer <token> header is required"
    case .tokenTooLarge(let size, let max): "token of \(size) bytes exceeds the limit of \(max) bytes"
    case .malformedToken(let why): "malformed token: \(why)"
    case .unsupportedAlgorithm(let alg): "unsupported token algorithm \(Self.quote(alg))"
    case .unknownKey(let kid): kid.map { "no key with kid \(Self.quote($0))" } ?? "no key for this token"
    case .invalidSignature: "token signature is invalid"
    case .expired(let at): "token expired at \(Self.unixTime(at)) (unix time)"
    case .notYetValid(let from): "token is not valid before \(Self.unixTime(from)) (unix time)"
    case .invalidIssuer: "token issuer is not accepted"
    case .invalidAudience: "token audience is not accepted"
    case .missingSubject: "token has no subject (sub)"
    case .invalidScope(let why): why
    case .replayedAssertion: "this assertion was used already; sign a new one for each token request"
    }
  }

  /// Whole seconds when they fit an Int64, else the Double as written: the time comes from a
  /// signed but arbitrary claim (`exp: -1e300`), and `Int64(_:)` would trap on it.
  static func unixTime(_ date: Date) -> String {
    let seconds = date.timeIntervalSince1970.rounded(.towardZero)
    return Int64(exactly: seconds).map(String.init) ?? "\(seconds)"
  }

  /// Token-supplied text, truncated so an error message cannot be made large.
  static func quote(_ text: String) -> String {
    let short = text.count > 40 ? String(text.prefix(40)) + "…" : text
    return "\"" + short + "\""
  }
}
