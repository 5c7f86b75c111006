import Foundation
import LarderCrypto

/// A Google-format service-account key file (what `larder service-account create` writes), read
/// to act as the account: ``assertion(audience:scope:now:)`` is the RS256 JWT-bearer grant that
/// ``ServiceAccountGrant/verify(_:key:clientEmail:audiences:now:leeway:)`` checks, made as
/// google-auth makes it (`kid` = `private_key_id`, `iss` = `sub` = `client_email`, `aud` =
/// `token_uri`, an hour from `iat` to `exp`, `scope`).
///
/// ```swift
/// let key = try ServiceAccountKeyFile(json: Array(try Data(contentsOf: url)))
/// let assertion = try key.assertion()   // POST it to key.tokenURI as grant_type=jwt-bearer
/// ```
public struct ServiceAccountKeyFile: Sendable {
  public let clientEmail: String
  public let privateKeyID: String
  public let tokenURI: String
  public let privateKey: PrivateKey

  /// The scope Larder's CLI asks for: an admin identity over every bucket.
  public static let fullControlScope = "https://www.googleapis.com/auth/devstorage.full_control"

  /// Reads the key file's JSON.
  /// - Throws: ``KeyFileError`` naming what is missing or unusable.
  public init(json: [UInt8]) throws(KeyFileError) {
    guard let object = JSONValue.parseObject(json) else { throw .notJSON }
    func field(_ name: String) throws(KeyFileError) -> String {
      guard let value = object[name]?.stringValue, !value.isEmpty else { throw .missingField(name) }
      return value
    }
    guard object["type"]?.stringValue == "service_account" else { throw .notServiceAccount }
    clientEmail = try field("client_email")
    privateKeyID = try field("private_key_id")
    tokenURI = try field("token_uri")
    let pem = try field("private_key")
    do { privateKey = try PrivateKey(pem: Array(pem.utf8)) } catch { throw .unusableKey("\(error)") }
  }

  /// The signed JWT-bearer assertion for the key file's `token_uri` (or `audience`).
  /// - Throws: ``CryptoError`` when OpenSSL cannot sign.
  public func assertion(
    audience: String? = nil, scope: String = fullControlScope, lifetime: TimeInterval = 3600,
    now: Date = Date()
  ) throws(CryptoError) -> String {
    let issuedAt = Int64(now.timeIntervalSince1970.rounded(.down))
    let header: [String: JSONValue] = ["alg": "RS256", "typ": "JWT", "kid": .string(privateKeyID)]
    let claims: [String: JSONValue] = [
      "iss": .string(clientEmail), "sub": .string(clientEmail), "aud": .string(audience ?? tokenURI),
      "scope": .string(scope), "iat": .int(issuedAt), "exp": .int(issuedAt + Int64(lifetime)),
    ]
    let input =
      Base64URL.encode(JSONValue.serialize(header)) + "." + Base64URL.encode(JSONValue.serialize(claims))
    return input + "." + Base64URL.encode(try privateKey.signRS256(Array(input.utf8)))
  }
}

/// Why a file is not a usable service-account key.
public enum KeyFileError: Error, Sendable, Equatable, CustomStringConvertible {
  case notJSON
  case notServiceAccount
  case missingField(String)
  case unusableKey(String)

  public var description: String {
    switch self {
    case .notJSON: "it is not a JSON object"
    case .notServiceAccount: "its type is not service_account"
    case .missingField(let name): "it has no \(name)"
    case .unusableKey(let why): "its private_key cannot be used: \(why)"
    }
  }
}
