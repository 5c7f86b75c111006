import Foundation
import Larder
import LarderAuth
import LarderCrypto
import LarderHTTP
import Synchronization

/// Service accounts as Google clients expect them: keys made by ``create(name:publicURL:in:)``
/// (a Google-format key file whose public half the catalog keeps), read back here for `/token`,
/// access tokens and V4 signed URLs on every node.
///
/// ```swift
/// let made = try ServiceAccounts.create(name: "backend", publicURL: "https://files.example.com", in: larder)
/// try made.keyFile.write(to: URL(filePath: "backend.json"))
/// let accounts = ServiceAccounts(larder: larder, secret: secret)
/// accounts.key(id: kid)          // the catalog's key, cached for `cacheTTL`
/// ```
/// Lookups are cached for ``cacheTTL`` (a revoked key's tokens and URLs stop working within it
/// on every node); a catalog that fails to answer leaves a cached answer in use, and without
/// one, the key counts as absent.
public final class ServiceAccounts: Sendable {
  public let larder: Larder
  /// The catalog's token secret, from which access tokens' key is derived.
  public let secret: [UInt8]
  public let cacheTTL: Duration
  private let cache = Mutex<[String: (keys: [Key], until: ContinuousClock.Instant)]>([:])

  /// One usable key of an account.
  public struct Key: Sendable {
    public let record: ServiceAccountKeyRecord
    public let publicKey: PublicKey
  }

  public init(larder: Larder, secret: [UInt8], cacheTTL: Duration = .seconds(5)) {
    self.larder = larder
    self.secret = secret
    self.cacheTTL = cacheTTL
  }

  /// The key `keyID`, or nil when it is not (or no longer) in the catalog.
  public func key(id keyID: String) -> Key? {
    cached("kid:" + keyID) { try larder.serviceAccountKey(id: keyID).map { [$0] } ?? [] }.first
  }

  /// Every key of the account `clientEmail`.
  public func keys(email clientEmail: String) -> [Key] {
    cached("email:" + clientEmail) { try larder.serviceAccountKeys(email: clientEmail) }
  }

  private func cached(_ cacheKey: String, _ load: () throws -> [ServiceAccountKeyRecord]) -> [Key] {
    let now = ContinuousClock.now
    let hit = cache.withLock { $0[cacheKey] }
    if let hit, hit.until > now { return hit.keys }
    guard let records = try? load() else { return hit?.keys ?? [] }
    let keys = records.compactMap { record -> Key? in
      guard let key = try? PublicKey.allFromPEM(Array(record.publicKeyPEM.utf8)).first else { return nil }
      return Key(record: record, publicKey: key)
    }
    cache.withLock { entries in
      if entries.count > 10_000 { entries.removeAll() }  // bounded: names come from requests
      entries[cacheKey] = (keys, now + cacheTTL)
    }
    return keys
  }

  // MARK: making keys

  /// A new key: what `larder service-account create` writes, and the record the catalog keeps.
  public struct Created: Sendable {
    public let record: ServiceAccountKeyRecord
    /// The Google-format key file (`type: service_account`, `private_key`, `token_uri`, …).
    public let keyFile: [String: String]

    /// The key file as JSON, pretty-printed with sorted keys.
    public func keyFileJSON() -> [UInt8] {
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
      return Array((try? encoder.encode(keyFile)) ?? Data()) + [0x0A]
    }
  }

  /// The project every account's email names (`NAME@larder.iam.larder`), and the key files'
  /// `project_id`.
  public static let projectID = "larder"
  /// When neither `--public-url` nor `LARDER_PUBLIC_URL` says where the server is.
  public static let defaultPublicURL = "http://127.0.0.1:8080"

  /// A service account name: 1–63 of `a–z 0–9 -`, starting with a letter (as Google's, loosely).
  public static func validate(name: String) throws {
    let bytes = Array(name.utf8)
    guard (1...63).contains(bytes.count), let first = bytes.first, (0x61...0x7A).contains(first),
      bytes.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D })
    else {
      throw LarderError.invalidArgument(
        "a service account name is 1 to 63 lower-case letters, digits and '-', starting with a letter")
    }
  }

  /// Makes an RSA 2048 key for the account `name`, records its public half in `larder`'s
  /// catalog, and returns the key file (the only copy of the private key).
  public static func create(name: String, publicURL: String, in larder: Larder) throws -> Created {
    try validate(name: name)
    var base = publicURL
    while base.hasSuffix("/") { base.removeLast() }
    guard let url = URL(string: base), url.scheme == "http" || url.scheme == "https", url.host != nil else {
      throw LarderError.invalidArgument(
        "the public URL must be http(s)://host[:port], got '\(publicURL.prefix(80))'")
    }
    let key = try PrivateKey.generateRSA(bits: 2048)
    let email = "\(name)@\(projectID).iam.larder"
    let clientID = String(UInt64.random(in: 100_000_000_000_000_000...999_999_999_999_999_999))
    let record = ServiceAccountKeyRecord(
      keyID: SecureRandom.hexIdentifier(byteCount: 20), name: name, clientEmail: email, clientID: clientID,
      publicKeyPEM: key.publicKeyPEM())
    try larder.addServiceAccountKey(record)
    let keyFile: [String: String] = [
      "type": "service_account", "project_id": projectID, "private_key_id": record.keyID,
      "private_key": key.pkcs8PEM(), "client_email": email, "client_id": clientID,
      "auth_uri": base + "/auth", "token_uri": base + "/token",
      "auth_provider_x509_cert_url": base + "/certs", "client_x509_cert_url": base + "/certs/" + email,
      "universe_domain": "googleapis.com",
    ]
    return Created(record: record, keyFile: keyFile)
  }
}

/// Accepts the access tokens `/token` issues (marking the caller as a service account), and
/// hands every other credential to `base`.
///
/// A token verifies offline (its HMAC key derives from the catalog's token secret), and its key
/// must still be in the catalog (``ServiceAccounts/key(id:)``, cached briefly): revoking a key
/// ends its tokens.
public struct ServiceAccountAuthenticator: Authenticator {
  public let base: any Authenticator
  public let accounts: ServiceAccounts

  public init(base: any Authenticator, accounts: ServiceAccounts) {
    self.base = base
    self.accounts = accounts
  }

  public func authenticate(_ headers: HTTPHeaders) throws(AuthError) -> Identity? {
    guard let value = headers["Authorization"], let token = parseAuthorizationHeader(value),
      ServiceAccountAccessToken.isAccessToken(token)
    else { return try base.authenticate(headers) }
    let (email, kid, verified) = try ServiceAccountAccessToken.verify(token, secret: accounts.secret)
    guard let key = accounts.key(id: kid), key.record.clientEmail == email else {
      throw .unknownKey(kid: kid)
    }
    guard case .string(let scopes)? = verified.claims["scope"] else { throw .invalidScope("the token has no scope") }
    return Identity(
      uid: email, claims: verified.claims, serviceAccount: email,
      serviceAccountScope: try ServiceAccountScope(scopes: scopes))
  }
}
