import Foundation

/// A token whose signature and time window have been checked; becomes
/// `request.auth = {uid: uid, token: claims}`.
public struct VerifiedToken: Sendable, Equatable {
  /// The `sub` claim.
  public let uid: String
  /// Every claim of the payload, including `sub`, `exp`, `iat`, `iss`, `aud`.
  public let claims: [String: JSONValue]
  /// The `exp` claim.
  public let expiresAt: Date
  /// The algorithm that verified the signature.
  public let algorithm: JWTAlgorithm

  public init(uid: String, claims: [String: JSONValue], expiresAt: Date, algorithm: JWTAlgorithm) {
    self.uid = uid
    self.claims = claims
    self.expiresAt = expiresAt
    self.algorithm = algorithm
  }
}
