import Foundation
import Larder
import LarderAuth
import LarderHTTP

/// V4 signed URLs (`GOOG4-RSA-SHA256`), XML-API shaped as google-cloud-storage's
/// `generate_signed_url(version="v4", api_access_endpoint=URL)` makes them:
///
/// ```
/// GET|HEAD|PUT /{bucket}/{object, slashes kept}?X-Goog-Algorithm=GOOG4-RSA-SHA256
///     &X-Goog-Credential={client_email}/{date}/auto/storage/goog4_request&X-Goog-Date=…
///     &X-Goog-Expires=…&X-Goog-SignedHeaders=host&X-Goog-Signature=<hex>
/// ```
/// The routes exist only for requests whose query carries `X-Goog-Signature` (and are declared
/// after every other route), so nothing else changes. A URL that verifies against a key of its
/// credential's account acts as that account, an admin identity, for that method and object
/// only until `X-Goog-Expires`; downloads and uploads are the Firebase API's own code paths
/// (Range, conditionals, `maxSize`, size limit, the write path).
struct SignedURLEndpoint {
  let context: ServiceContext
  let accounts: ServiceAccounts

  func register(in router: inout Router) {
    let objects = ObjectsEndpoint(context: context)
    let pattern = "/{bucket}/{object...}"
    let signed = [GoogleV4Signing.signatureParameter: Router.anyValue]
    for method in ["GET", "HEAD", "PUT"] {
      router.add(
        method, pattern, query: signed, route: "signed.\(method.lowercased())", options: .noHeadFallback
      ) {
        request, params in
        let (path, identity) = try verify(request, params)
        if method == "PUT" {
          return .receiveBody(try objects.upload(request, path: path, identity: identity))
        }
        return .respond(try objects.read(request, path: path, identity: identity, media: true))
      }
    }
  }

  /// The object and the signer, once the signature, its time window and the signer's key check.
  /// - Throws: ``SignedURLError`` (403, or 400 when malformed), name errors.
  func verify(_ request: HTTPRequest, _ params: RouteParameters) throws -> (ObjectPath, Identity) {
    let bucket = try context.bucket(params)
    let name = try params.decoded("object")
    let query = request.query.map { (name: $0.name, value: $0.value ?? "") }
    let email = try SignedURLVerifier.credentialEmail(query)
    _ = try SignedURLVerifier.verify(
      method: request.method, path: "/\(bucket)/\(name)", query: query, header: { request.headers[$0] },
      keys: accounts.keys(email: email).map(\.publicKey))
    context.logServiceAccount(email, request, via: "signed URL")
    return (try ObjectPath(bucket: bucket, name: name), Identity(uid: email, serviceAccount: email))
  }
}
