import Foundation
import LarderAuth
import Synchronization
import LarderHTTP

/// Turns a request's credentials into an ``Identity``.
public protocol Authenticator: Sendable {
  /// nil for an anonymous request (no `Authorization`).
  /// - Throws: ``AuthError`` for a present but invalid credential (answered 401).
  func authenticate(_ headers: HTTPHeaders) throws(AuthError) -> Identity?
}

/// Bearer JWTs (`Authorization: Bearer <t>` or `Firebase <t>`), verified by ``JWTVerifier``.
///
/// The public keys can be re-read from their files while serving (SIGHUP), since Google
/// rotates the keys Firebase Auth ID tokens are signed with every few days:
///
/// ```swift
/// let auth = try JWTAuthenticator(verifier: verifier, keyFiles: [URL(filePath: "securetoken.json")])
/// auth.reloadKeys()   // nil, or why the old keys stay
/// ```
public final class JWTAuthenticator: Authenticator {
  /// The files ``reloadKeys()`` reads: PEM, JWKS or Google's `kid` → certificate JSON.
  public let keyFiles: [URL]
  private let current: Mutex<JWTVerifier>

  /// The verifier as configured now.
  public var verifier: JWTVerifier { current.withLock { $0 } }

  /// Uses `verifier` as given; `keyFiles` are only read by ``reloadKeys()``.
  public init(verifier: JWTVerifier, keyFiles: [URL] = []) {
    self.keyFiles = keyFiles
    current = Mutex(verifier)
  }

  /// Every key of `files`, in any format ``KeyLoader/file(at:)`` reads.
  /// - Throws: `AuthConfigurationError` naming the file.
  public static func loadKeys(_ files: [URL]) throws(AuthConfigurationError) -> [VerificationKey] {
    var keys: [VerificationKey] = []
    for file in files { keys += try KeyLoader.file(at: file) }
    return keys
  }

  /// Re-reads ``keyFiles`` and verifies later requests with their keys. All or nothing: when a
  /// file is missing or broken, every old key stays (a half-written download must not log every
  /// user out). Returns nil on success, else the reason.
  @discardableResult
  public func reloadKeys() -> String? {
    guard !keyFiles.isEmpty else { return nil }
    do {
      let keys = try Self.loadKeys(keyFiles)
      current.withLock { old in
        old = JWTVerifier(
          hmacSecret: old.hmacSecret, publicKeys: keys, issuer: old.issuer, audience: old.audience, leeway: old.leeway,
          maxTokenSize: old.maxTokenSize)
      }
      return nil
    } catch {
      return error.message
    }
  }

  public func authenticate(_ headers: HTTPHeaders) throws(AuthError) -> Identity? {
    guard let value = headers["Authorization"] else { return nil }
    guard let token = parseAuthorizationHeader(value) else { throw AuthError.malformedToken("the Authorization scheme must be Bearer or Firebase") }
    let verified = try verifier.verify(token)
    return Identity(uid: verified.uid, claims: verified.claims)
  }
}
