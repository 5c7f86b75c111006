import LarderCrypto

/// A public key a `JWTVerifier` accepts, with the `kid` tokens name it by.
///
/// The key's kind decides the only algorithm it verifies: RSA keys RS256, P-256 keys ES256. An HS256
/// token never reaches a public key (HS256 uses the configured secret alone), which is what defeats
/// algorithm confusion.
public struct VerificationKey: Sendable {
  /// The JWK `kid`, or nil for a key that any token of its algorithm may try.
  public let kid: String?
  public let key: PublicKey

  public init(kid: String?, key: PublicKey) {
    self.kid = kid
    self.key = key
  }

  /// The JWS `alg` this key verifies.
  public var algorithm: JWTAlgorithm {
    switch key.kind {
    case .rsa: .rs256
    case .ecP256: .es256
    }
  }
}
