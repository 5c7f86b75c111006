import Foundation
import LarderCrypto

/// Loads the public keys RS256/ES256 tokens are verified with: PEM files (`PUBLIC KEY` blocks or
/// `CERTIFICATE`s) and JWKS documents (RFC 7517: RSA keys, and EC keys on P-256).
///
/// ```swift
/// let keys = try KeyLoader.pemFile(at: URL(filePath: "idp.pem"), kid: "2024-1")
///          + KeyLoader.jwksFile(at: URL(filePath: "jwks.json"))
/// ```
/// JWKS entries that cannot sign JWTs for Larder (`use: "enc"`, other key types or curves, an
/// `alg` other than RS256/ES256) are skipped, since identity providers publish mixed sets; a
/// supported entry with broken numbers is an error, and so is a file with no usable key at all.
public enum KeyLoader {
  /// Files larger than this are refused: a key set is a few KiB.
  public static let maxFileSize = 1 << 20

  /// Every key in a PEM file, all given `kid` (nil: tokens with any kid, or none, may use them).
  /// - Throws: `AuthConfigurationError.invalidKeyFile` or `.io`.
  public static func pemFile(at url: URL, kid: String? = nil) throws(AuthConfigurationError)
    -> [VerificationKey]
  {
    try pem(readFile(url), kid: kid, source: url.path)
  }

  /// Every key in PEM text.
  /// - Throws: `AuthConfigurationError.invalidKeyFile`.
  public static func pem(_ bytes: [UInt8], kid: String? = nil, source: String = "<pem>")
    throws(AuthConfigurationError)
    -> [VerificationKey]
  {
    do {
      return try PublicKey.allFromPEM(bytes).map { VerificationKey(kid: kid, key: $0) }
    } catch {
      throw .invalidKeyFile(path: source, reason: error.message)
    }
  }

  /// Every usable key of a JWKS file.
  /// - Throws: `AuthConfigurationError.invalidKeyFile` or `.io`.
  public static func jwksFile(at url: URL) throws(AuthConfigurationError) -> [VerificationKey] {
    try jwks(readFile(url), source: url.path)
  }

  /// Every usable key of a JWKS document (`{"keys": [...]}`).
  /// - Throws: `AuthConfigurationError.invalidKeyFile`.
  public static func jwks(_ bytes: [UInt8], source: String = "<jwks>") throws(AuthConfigurationError)
    -> [VerificationKey]
  {
    func fail(_ reason: String) -> AuthConfigurationError { .invalidKeyFile(path: source, reason: reason) }
    guard let document = JSONValue.parseObject(bytes), case .array(let entries)? = document["keys"] else {
      throw fail("not a JWKS document (a JSON object with a \"keys\" array)")
    }
    var keys = [VerificationKey]()
    for (index, entry) in entries.enumerated() {
      guard let jwk = entry.objectValue else { throw fail("keys[\(index)] is not an object") }
      if let use = jwk["use"], use != "sig" { continue }
      let kid: String?
      switch jwk["kid"] {
      case nil: kid = nil
      case .string(let s)?: kid = s
      default: throw fail("keys[\(index)].kid is not a string")
      }
      func number(_ name: String) throws(AuthConfigurationError) -> [UInt8] {
        guard let text = jwk[name]?.stringValue, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
          throw fail("keys[\(index)].\(name) is missing or not base64url")
        }
        return bytes
      }
      do {
        switch (jwk["kty"]?.stringValue, jwk["alg"]?.stringValue) {
        case ("RSA", nil), ("RSA", "RS256"?):
          keys.append(
            VerificationKey(kid: kid, key: try PublicKey(rsaModulus: number("n"), exponent: number("e"))))
        case ("EC", nil), ("EC", "ES256"?):
          guard jwk["crv"] == "P-256" else { continue }
          keys.append(VerificationKey(kid: kid, key: try PublicKey(p256X: number("x"), y: number("y"))))
        default:
          continue
        }
      } catch let error as CryptoError {
        throw fail("keys[\(index)]: \(error.message)")
      } catch let error as AuthConfigurationError {
        throw error
      } catch {
        throw fail("keys[\(index)]: \(error)")
      }
    }
    guard !keys.isEmpty else { throw fail("no RS256 or ES256 signing key (RSA, or EC on P-256)") }
    return keys
  }

  private static func readFile(_ url: URL) throws(AuthConfigurationError) -> [UInt8] {
    let path = url.path
    guard let handle = FileHandle(forReadingAtPath: path) else {
      throw .io(path: path, operation: "open", errno: access(path, R_OK) == 0 ? EIO : errno)
    }
    defer { try? handle.close() }
    let data: Data?
    do { data = try handle.read(upToCount: maxFileSize + 1) } catch {
      throw .io(path: path, operation: "read", errno: EIO)
    }
    let bytes = Array(data ?? Data())
    guard bytes.count <= maxFileSize else {
      throw .invalidKeyFile(path: path, reason: "larger than \(maxFileSize) bytes")
    }
    return bytes
  }
}
