import Foundation
import LarderCrypto

/// Loads the public keys RS256/ES256 tokens are verified with: PEM files (`PUBLIC KEY` blocks or
/// `CERTIFICATE`s), JWKS documents (RFC 7517: RSA keys, and EC keys on P-256), and Google's
/// published x509 JSON, a map of `kid` → PEM certificate (what Firebase Auth ID tokens are
/// signed against, from
/// `https://www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com`).
///
/// ```swift
/// let keys = try KeyLoader.pemFile(at: URL(filePath: "idp.pem"), kid: "2024-1")
///          + KeyLoader.jwksFile(at: URL(filePath: "jwks.json"))
/// let firebase = try KeyLoader.file(at: URL(filePath: "securetoken.json"))   // any of the three
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

  /// Every key of a file in any of the three formats, told apart by content: a JSON object with a
  /// `keys` array is JWKS, any other JSON object Google's `kid` → certificate map, text with a
  /// `-----BEGIN` line PEM, and anything else is reported as not being a JWKS document.
  /// (Google's JSON holds `-----BEGIN` too, so JSON is recognised first.)
  /// - Throws: `AuthConfigurationError.invalidKeyFile` or `.io`.
  public static func file(at url: URL) throws(AuthConfigurationError) -> [VerificationKey] {
    let bytes = try readFile(url)
    if bytes.first(where: { ![0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) }) == UInt8(ascii: "{") {
      if JSONValue.parseObject(bytes)?["keys"] != nil { return try jwks(bytes, source: url.path) }
      return try x509Certificates(bytes, source: url.path)
    }
    if String(decoding: bytes, as: UTF8.self).contains("-----BEGIN") { return try pem(bytes, source: url.path) }
    return try jwks(bytes, source: url.path)
  }

  /// Every key of a `kid` → PEM certificate map, each with its `kid`: a token naming a kid that is
  /// not in the map is refused (Google signs with one kid at a time and publishes the next early).
  /// - Throws: `AuthConfigurationError.invalidKeyFile` for a document that is not such a map, or a
  ///   certificate OpenSSL cannot read.
  public static func x509Certificates(_ bytes: [UInt8], source: String = "<x509 json>") throws(AuthConfigurationError)
    -> [VerificationKey]
  {
    func fail(_ reason: String) -> AuthConfigurationError { .invalidKeyFile(path: source, reason: reason) }
    guard let document = JSONValue.parseObject(bytes) else {
      throw fail("not a JSON object mapping key ids to PEM certificates")
    }
    var keys = [VerificationKey]()
    for (kid, value) in document.sorted(by: { $0.key < $1.key }) {
      guard case .string(let text) = value, text.contains("-----BEGIN CERTIFICATE-----") else {
        throw fail("\"\(kid.prefix(60))\" is not a PEM certificate")
      }
      let certificates: [PublicKey]
      do { certificates = try PublicKey.allFromPEM(Array(text.utf8)) } catch {
        throw fail("\"\(kid.prefix(60))\": \(error.message)")
      }
      guard certificates.count == 1 else { throw fail("\"\(kid.prefix(60))\" holds \(certificates.count) certificates") }
      keys.append(VerificationKey(kid: kid, key: certificates[0]))
    }
    guard !keys.isEmpty else { throw fail("no certificates (expected {\"<kid>\": \"-----BEGIN CERTIFICATE-----...\"})") }
    return keys
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
