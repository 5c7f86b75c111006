/// Why OpenSSL (or Larder's use of it) refused a key, a signature input or a saved digest
/// state; `code` is stable for logs and tests.
public enum CryptoError: Error, Sendable, Equatable {
  /// The bytes are not a key OpenSSL can read (bad PEM, bad JWK numbers, a point off the curve).
  case invalidKey(String)
  /// A well-formed key of a kind Larder does not verify with (Ed25519, P-384, RSA-PSS, DSA…).
  case unsupportedKey(String)
  /// An RSA key shorter than `minimumBits`, refused because it can be factored.
  case weakKey(bits: Int, minimumBits: Int)
  /// Bytes given to `Digest(restoringSHA256:)` that are not a state `savedState()` wrote.
  case invalidDigestState(String)

  public var code: String {
    switch self {
    case .invalidKey: "invalid_key"
    case .unsupportedKey: "unsupported_key"
    case .weakKey: "weak_key"
    case .invalidDigestState: "invalid_digest_state"
    }
  }

  public var message: String {
    switch self {
    case .invalidKey(let why): "invalid key: \(why)"
    case .unsupportedKey(let what): "unsupported key type: \(what)"
    case .weakKey(let bits, let minimum): "RSA key of \(bits) bits is too short (minimum \(minimum))"
    case .invalidDigestState(let why): "invalid saved SHA-256 state: \(why)"
    }
  }
}
