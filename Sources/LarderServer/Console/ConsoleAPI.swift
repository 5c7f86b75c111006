import Foundation
import Larder
import LarderAuth
import LarderHTTP

/// The two calls the web console needs that the storage APIs do not have.
///
/// ```
/// GET  /console/v1/session                           who the token is: 200, or 401 saying why not
/// POST /console/v1/b/{bucket}/deleteFolder?prefix=P[&pageToken=T]   one batch of a folder delete
/// ```
/// `session` is the console's sign-in check: one cheap authenticated request, which answers
/// what the console shows (the subject, whether it is an admin identity, the buckets offered to
/// it, when the token expires) and refuses a bad token with the authenticator's reason.
///
/// `deleteFolder` deletes everything under the folder `P` (a prefix ending in `/`), in batches
/// of at most ``batchSize`` objects in name order, so a folder of any size is deleted by a loop
/// of short requests (the console shows the progress between them; nothing is held open). Each
/// object goes through ``ObjectService/delete(_:identity:ifGenerationMatch:generation:check:)``, the one
/// delete path: the rules judge each object's `delete`, and the store records each `deleted`
/// event. What was refused is answered by name with the reason in words, and stays; the next
/// batch starts after the last name examined (`nextPageToken`, absent at the end).
///
///     {"deleted": ["f/a.txt"], "refused": [{"name": "f/locked.txt", "reason": "…"}],
///      "unlisted": 0, "nextPageToken": "…"}
///
/// The folder must be listable by the caller (403 otherwise); objects in subfolders the caller
/// may not list are neither deleted nor named, only counted (`unlisted`).
struct ConsoleAPI {
  let context: ServiceContext

  /// Objects examined per `deleteFolder` request.
  static let batchSize = 100

  struct Session: Encodable {
    var subject: String
    /// A service account with full control: sees every bucket and the Store view.
    var admin: Bool
    var serviceAccount: String?
    /// The buckets the server offers users (`larder serve --console-buckets`).
    var buckets: [String]
    /// The token's `exp`, in seconds since 1970, when it has one.
    var expiresAt: Int64?
  }

  struct Refusal: Encodable, Equatable {
    var name: String
    var reason: String
  }

  struct FolderBatch: Encodable {
    var deleted: [String]
    var refused: [Refusal]
    var unlisted: Int
    var nextPageToken: String?
  }

  func register(in router: inout Router) {
    router.add("GET", "/console/v1/session", route: "console.session") { request, _ in
      guard let identity = try context.identity(request) else { throw AuthError.missingToken }
      let expiry: Int64? =
        switch identity.claims["exp"] {
        case .int(let n): n
        case .double(let d): Int64(exactly: d.rounded(.down))
        default: nil
        }
      let session = Session(
        subject: identity.uid, admin: identity.isAdmin, serviceAccount: identity.serviceAccount,
        buckets: context.consoleBuckets, expiresAt: expiry)
      var response = HTTPResponse.json(session)
      response.headers.set("Cache-Control", "no-store")
      return .respond(response)
    }
    router.add("POST", "/console/v1/b/{bucket}/deleteFolder", route: "console.deleteFolder") { request, params in
      let bucket = try context.bucket(params)
      let identity = try context.identity(request)
      guard let prefix = request.queryValue("prefix"), prefix.hasSuffix("/"), prefix.count > 1 else {
        throw LarderError.invalidArgument("prefix must name a folder: non-empty, ending in '/'")
      }
      var response = HTTPResponse.json(
        try deleteBatch(bucket: bucket, prefix: prefix, pageToken: request.queryValue("pageToken"), identity: identity))
      response.headers.set("Cache-Control", "no-store")
      return .respond(response)
    }
  }

  /// Deletes up to ``batchSize`` objects under `prefix`, after `pageToken`.
  /// - Throws: ``AccessError`` when the folder may not be listed; the listing's errors (a bad
  ///   page token); any store failure other than a refusal of one object.
  func deleteBatch(bucket: String, prefix: String, pageToken: String?, identity: Identity?) throws -> FolderBatch {
    let folder = String(prefix.dropLast())
    try context.authorize(AccessRequest(operation: .list, bucket: bucket, name: folder, identity: identity))
    let page = try context.larder.objects.list(
      bucket: bucket, prefix: prefix, maxResults: Self.batchSize, pageToken: pageToken)
    var folders = ObjectService.ListableFolders(context: context, bucket: bucket, identity: identity, listed: folder)
    let service = ObjectService(context: context)
    var batch = FolderBatch(deleted: [], refused: [], unlisted: 0, nextPageToken: page.nextPageToken)
    for object in page.items {
      guard folders.allow(object.name) else {
        batch.unlisted += 1
        continue
      }
      do {
        try service.delete(try ObjectPath(bucket: bucket, name: object.name), identity: identity)
        batch.deleted.append(object.name)
      } catch is AccessError {
        batch.refused.append(Refusal(name: object.name, reason: "the rules do not allow you to delete it"))
      } catch LarderError.preconditionFailed {
        batch.refused.append(Refusal(name: object.name, reason: "it was replaced while the folder was being deleted"))
      } catch LarderError.notFound {
        continue  // deleted by someone else meanwhile: gone, as asked
      }
    }
    return batch
  }
}
