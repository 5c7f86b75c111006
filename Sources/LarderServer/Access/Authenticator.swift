import Foundation
import LarderAuth
import LarderHTTP

/// Turns a request's credentials into an ``Identity``.
public protocol Authenticator: Sendable {
  /// nil for an anonymous request (no `Authorization`).
  /// - Throws: ``AuthError`` for a present but invalid credential (answered 401).
  func authenticate(_ headers: HTTPHeaders) throws(AuthError) -> Identity?
}

/// Bearer JWTs (`Authorization: Bearer <t>` or `Firebase <t>`), verified by ``JWTVerifier``.
public struct JWTAuthenticator: Authenticator {
  public let verifier: JWTVerifier
  public init(verifier: JWTVerifier) { self.verifier = verifier }

  public func authenticate(_ headers: HTTPHeaders) throws(AuthError) -> Identity? {
    guard let value = headers["Authorization"] else { return nil }
    guard let token = parseAuthorizationHeader(value) else { throw AuthError.malformedToken("the Authorization scheme must be Bearer or Firebase") }
    let verified = try verifier.verify(token)
    return Identity(uid: verified.uid, claims: verified.claims)
  }
}
