/// Why OpenSSL refused a key or a signature input; `code` is stable for logs and tests.
public enum CryptoError: Error, Sendable, Equatable {
  /// The bytes are not a key OpenSSL can read (bad PEM, bad JWK numbers, a point off the curve).
  case invalidKey(String)
  /// A well-formed key of a kind Larder does not verify with (Ed25519, P-384, RSA-PSS, DSA…).
  case unsupportedKey(String)
  /// An RSA key shorter than `minimumBits`, refused because it can be factored.
  case weakKey(bits: Int, minimumBits: Int)

  public var code: String {
    switch self {
    case .invalidKey: "invalid_key"
    case .unsupportedKey: "unsupported_key"
    case .weakKey: "weak_key"
    }
  }

  public var message: String {
    switch self {
    case .invalidKey(let why): "invalid key: \(why)"
    case .unsupportedKey(let what): "unsupported key type: \(what)"
    case .weakKey(let bits, let minimum): "RSA key of \(bits) bits is too short (minimum \(minimum))"
    }
  }
}
