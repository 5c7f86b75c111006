import Foundation
import Larder
import LarderAuth
import LarderHTTP

/// The Google Cloud Storage JSON API over the same objects as the Firebase REST API, so that the
/// Admin SDKs and Google Cloud clients (`STORAGE_EMULATOR_HOST`) work unmodified.
///
/// ```
/// GET    /storage/v1/b?project=P                        buckets that hold objects
/// POST   /storage/v1/b?project=P                        a new bucket's name checked (admin identities)
/// GET    /storage/v1/b/{bucket}                         a bucket
/// GET    /storage/v1/b/{bucket}/o                       list: prefix, delimiter, includeTrailingDelimiter,
///                                                       startOffset, endOffset, matchGlob, maxResults, pageToken
/// GET    /storage/v1/b/{bucket}/o/{object}[?alt=media]  the object resource, or its bytes
/// PATCH  /storage/v1/b/{bucket}/o/{object}              change metadata (null clears, metadata merges)
/// PUT    /storage/v1/b/{bucket}/o/{object}              replace metadata (absent fields are cleared)
/// DELETE /storage/v1/b/{bucket}/o/{object}              → 204
/// POST   /storage/v1/b/{b}/o/{o}/copyTo/b/{b2}/o/{o2}   copy (no bytes copied: content is addressed)
/// POST   /storage/v1/b/{b}/o/{o}/rewriteTo/b/{b2}/o/{o2} the same, done in one call
/// POST   /storage/v1/b/{bucket}/o/{object}/compose      concatenate up to 32 sources
/// GET    /download/storage/v1/b/{bucket}/o/{object}?alt=media    bytes: Range, conditionals
/// POST   /upload/storage/v1/b/{bucket}/o?uploadType=media|multipart|resumable   (see ``GcsUploads``)
/// ```
/// The same calls are served at the root too (`/b/{bucket}/o…`, no `/storage/v1`), where
/// firebase-admin for Node sends them with `STORAGE_EMULATOR_HOST` (as firebase-tools' emulator
/// serves them); uploads and downloads stay under `/upload/…` and `/download/…`.
/// Object names are percent-encoded in one path segment (`a%2Fb.txt`). Every request asks the
/// same authenticator and ``AccessPolicy`` as the Firebase endpoints, with the same operations
/// on `/b/{bucket}/o/{name}`, so rules (and any identity the authenticator knows) hold alike.
/// Preconditions (`ifGenerationMatch`, `ifGenerationNotMatch`, `ifMetagenerationMatch`,
/// `ifMetagenerationNotMatch`) answer 412; errors are GCS-shaped (``APIError``).
///
/// An adapter over ``ObjectService``, as ``ObjectsEndpoint`` is for the Firebase API.
struct GcsEndpoint {
  let context: ServiceContext
  /// Made once: a request's handler asks them several times, and making one copies the context.
  let objects: ObjectsEndpoint
  var service: ObjectService { objects.service }

  init(context: ServiceContext) {
    self.context = context
    objects = ObjectsEndpoint(context: context)
  }

  static let exposedHeaders = [
    "X-Goog-Hash", "X-Goog-Generation", "X-Goog-Metageneration", "X-Goog-Storage-Class", "Range",
  ]
  static let requestHeaders = [
    "X-Upload-Content-Type", "X-Upload-Content-Length", "Content-Range", "X-Goog-User-Project",
  ]

  func register(in router: inout Router) {
    register(in: &router, root: "/storage/v1")
    GcsUploads(context: context).register(in: &router)
  }

  /// The JSON API at the root (`/b/…`). Declared after the signed-URL routes: a signed URL of a
  /// bucket named `b` (`/b/{object}?X-Goog-Signature=…`) stays one, and no JSON API call carries
  /// `X-Goog-Signature`.
  func registerAtRoot(in router: inout Router) {
    register(in: &router, root: "")
  }

  private func register(in router: inout Router, root: String) {
    let bucket = root + "/b/{bucket}"
    let item = root + "/b/{bucket}/o/{object}"
    GcsAPI.add(&router, "GET", root + "/b", route: "gcs.buckets.list", options: .noHeadFallback) {
      request, _ in
      .respond(try listBuckets(request, identity: try context.identity(request)))
    }
    GcsAPI.add(&router, "POST", root + "/b", route: "gcs.buckets.insert") { request, _ in
      let identity = try context.identity(request)
      return .receiveBody(
        BufferedBodySink(limit: 64 * 1024) { body in try insertBucket(request, body: body, identity: identity) })
    }
    GcsAPI.add(&router, "GET", bucket, route: "gcs.buckets.get") { request, params in
      .respond(
        try getBucket(request, bucket: try context.bucket(params), identity: try context.identity(request)))
    }
    GcsAPI.add(&router, "GET", bucket + "/o", route: "gcs.objects.list", options: .noHeadFallback) {
      request, params in
      .respond(try list(request, bucket: try context.bucket(params), identity: try context.identity(request)))
    }
    let downloadPath = root == "/storage/v1" ? [("/download" + item, "gcs.objects.download")] : []
    for (path, label) in [(item, "gcs.objects.get")] + downloadPath {
      GcsAPI.add(&router, "GET", path, query: ["alt": "media"], route: "gcs.objects.download") {
        request, params in
        let (path, identity) = try target(request, params)
        return .respond(try download(request, path: path, identity: identity))
      }
      guard label == "gcs.objects.get" else { continue }
      GcsAPI.add(&router, "GET", path, route: label) { request, params in
        let (path, identity) = try target(request, params)
        let object = try readable(request, path: path, identity: identity)
        var r = try resource(object, request: request)
        if request.method == "HEAD" { r.body = .lengthOnly(r.body.length) }
        return .respond(r)
      }
    }
    for (method, label) in [("PATCH", "gcs.objects.patch"), ("PUT", "gcs.objects.update")] {
      GcsAPI.add(&router, method, item, route: label) { request, params in
        let (path, identity) = try target(request, params)
        let conditions = try GcsPreconditions(request)
        return .receiveBody(
          BufferedBodySink { body in
            let patch = try ObjectsEndpoint.parsePatch(
              body, replacing: method == "PUT", ignoring: Self.ignoredResourceFields)
            let updated = try service.update(patch, path: path, identity: identity, check: { try conditions.check($0) })
            return try resource(updated, request: request)
          })
      }
    }
    GcsAPI.add(&router, "DELETE", item, route: "gcs.objects.delete") { request, params in
      let (path, identity) = try target(request, params)
      return .respond(try delete(request, path: path, identity: identity))
    }
    for verb in ["copyTo", "rewriteTo"] {
      GcsAPI.add(
        &router,
        "POST", item + "/\(verb)/b/{destinationBucket}/o/{destinationObject}", route: "gcs.objects.\(verb)"
      ) {
        request, params in
        let (source, identity) = try target(request, params)
        let destinationBucket = try params.decoded("destinationBucket")
        try ObjectName.validateBucket(destinationBucket)
        let destination = try ObjectPath(
          bucket: destinationBucket, name: try params.decoded("destinationObject"))
        return .receiveBody(
          BufferedBodySink { body in
            try copy(
              request, body: body, from: source, to: destination, identity: identity,
              rewrite: verb == "rewriteTo")
          })
      }
    }
    GcsAPI.add(&router, "POST", item + "/compose", route: "gcs.objects.compose") { request, params in
      let (destination, identity) = try target(request, params)
      return .receiveBody(
        BufferedBodySink { body in try compose(request, body: body, to: destination, identity: identity) })
    }
  }

  /// Fields of an object resource that clients send back and a metadata write ignores, beyond
  /// those the Firebase PATCH ignores already (ACLs and holds Larder does not have).
  static let ignoredResourceFields: Set<String> = [
    "acl", "owner", "componentCount", "timeDeleted", "customTime", "temporaryHold", "eventBasedHold",
    "retentionExpirationTime", "kmsKeyName", "customerEncryption", "softDeleteTime", "hardDeleteTime",
  ]

  /// The bucket, caller and object of an item route, checked in that order.
  func target(_ request: HTTPRequest, _ params: RouteParameters) throws -> (ObjectPath, Identity?) {
    let bucket = try context.bucket(params)
    let identity = try context.identity(request)
    return (try ObjectPath(bucket: bucket, name: try params.decoded("object")), identity)
  }

  /// Where links in answers point: `--public-url`, else the request's own host.
  func base(_ request: HTTPRequest) -> String {
    (try? FirebaseUploads(context: context).uploadBase(request)) ?? ""
  }

  /// The object answer, with its MD5 and CRC32C known (computed now and recorded if need be).
  func resource(_ object: StoredObject, request: HTTPRequest) throws -> HTTPResponse {
    try GcsAPI.json(GcsObjectResource(withChecksums(object), base: base(request)), request: request)
  }

  func withChecksums(_ object: StoredObject) -> StoredObject {
    var known = object
    if let file = try? context.larder.files.withChecksums(object.file) { known.file = file }
    return known
  }

  // MARK: - reading

  /// The object the caller may `get`, of the generation it asks for, meeting its preconditions.
  /// - Throws: 403 (``AccessError``), 404, 412.
  func readable(_ request: HTTPRequest, path: ObjectPath, identity: Identity?) throws -> StoredObject {
    let object = try judged(request, path: path, identity: identity, operation: .get)
    var conditions = try GcsPreconditions(request)
    // On reads, as in GCS, a failed "not match" is 304 Not Modified, a failed "match" 412.
    var notMatch = GcsPreconditions()
    (notMatch.ifGenerationNotMatch, notMatch.ifMetagenerationNotMatch) =
      (conditions.ifGenerationNotMatch, conditions.ifMetagenerationNotMatch)
    (conditions.ifGenerationNotMatch, conditions.ifMetagenerationNotMatch) = (nil, nil)
    try conditions.check(object)
    if (try? notMatch.check(object)) == nil { throw HTTPResponseError(HTTPResponse(status: 304)) }
    return object
  }

  /// `alt=media`: the Firebase download path (Range, conditionals, `maxSize`, sendfile, nosniff
  /// and CSP, image variants), plus `x-goog-hash` so that the clients' checksum validation runs.
  /// For a variant every `X-Goog-*` header describes the variant's bytes (its hashes, its size):
  /// the clients check the body they get against them.
  func download(_ request: HTTPRequest, path: ObjectPath, identity: Identity?) throws -> HTTPResponse {
    let object = withChecksums(try readable(request, path: path, identity: identity))
    let (response, served) = try objects.mediaDownload(
      request, object: object, identity: identity, prepare: withChecksums
    ) {
      ObjectsEndpoint.DownloadHead(object)
    }
    var r = response
    if let hash = GcsObjectResource.hashHeader(served.file) { r.headers.set("X-Goog-Hash", hash) }
    r.headers.set("X-Goog-Storage-Class", "STANDARD")
    r.headers.set("X-Goog-Stored-Content-Length", String(served.file.size))
    r.headers.set("X-Goog-Stored-Content-Encoding", served.contentEncoding ?? "identity")
    return GcsAPI.reshapeError(r)
  }

  // MARK: - delete, list

  /// The object at `path` once the policy allowed `operation` on it, of the `generation` the
  /// request names if it names one.
  /// - Throws: 403 (``AccessError``), 404.
  func judged(_ request: HTTPRequest, path: ObjectPath, identity: Identity?, operation: AccessOperation)
    throws
    -> StoredObject
  {
    try service.judged(
      path, operation: operation, identity: identity, generation: try DecimalCount.query(request, "generation"))
  }

  func delete(_ request: HTTPRequest, path: ObjectPath, identity: Identity?) throws -> HTTPResponse {
    let conditions = try GcsPreconditions(request)
    // Only the row that was judged goes: if it was replaced meanwhile, 412.
    try service.delete(
      path, identity: identity, generation: try DecimalCount.query(request, "generation"),
      check: { try conditions.check($0) })
    return HTTPResponse(status: 204)
  }

  func list(_ request: HTTPRequest, bucket: String, identity: Identity?) throws -> HTTPResponse {
    let range = ListingRange(
      startOffset: request.queryValue("startOffset").flatMap { $0.isEmpty ? nil : $0 },
      endOffset: request.queryValue("endOffset").flatMap { $0.isEmpty ? nil : $0 },
      includeTrailingDelimiter: request.queryValue("includeTrailingDelimiter") == "true",
      glob: try request.queryValue("matchGlob").flatMap { $0.isEmpty ? nil : try NameGlob($0) })
    // GCS takes any maxResults and answers at most 1000.
    let page = try objects.listing(
      request, bucket: bucket, identity: identity, range: range, maxResultsCap: 1000)
    let base = base(request)
    struct Minimal: Encodable {
      var kind = "storage#object"
      var name: String
      var bucket: String
    }
    enum Item: Encodable {
      case full(GcsObjectResource)
      case minimal(Minimal)
      func encode(to encoder: any Encoder) throws {
        switch self {
        case .full(let r): try r.encode(to: encoder)
        case .minimal(let m): try m.encode(to: encoder)
        }
      }
    }
    struct Listing: Encodable {
      var kind = "storage#objects"
      var items: [Item]?
      var prefixes: [String]?
      var nextPageToken: String?
    }
    // Permission to list does not grant an object's metadata: items the caller may not `get`
    // are listed by name only (as the Firebase API lists every item).
    let items = page.items.map { object -> Item in
      service.mayGet(object, identity: identity)
        ? .full(GcsObjectResource(object, base: base))
        : .minimal(Minimal(name: object.name, bucket: object.bucket))
    }
    return try GcsAPI.json(
      Listing(
        items: items.isEmpty ? nil : items, prefixes: page.prefixes.isEmpty ? nil : page.prefixes,
        nextPageToken: page.nextPageToken), request: request)
  }

  // MARK: - buckets

  /// Whether the caller may see `bucket`: buckets have no rules of their own, so this is the
  /// policy's `list` of the bucket's root.
  func mayList(_ bucket: String, identity: Identity?) -> Bool {
    context.policy.decide(AccessRequest(operation: .list, bucket: bucket, name: "", identity: identity))
      .allowed
  }

  func getBucket(_ request: HTTPRequest, bucket: String, identity: Identity?) throws -> HTTPResponse {
    // Larder makes a bucket on its first write: every valid name is a bucket, empty until then.
    try context.authorize(AccessRequest(operation: .list, bucket: bucket, name: "", identity: identity))
    return try GcsAPI.json(GcsBucketResource(bucket, base: base(request)), request: request)
  }

  /// `buckets.insert`, for admin identities: a bucket exists through its objects, so this checks
  /// the name (GCS's rules, ``ObjectName/creatableBucketProblem(_:)``) and that no bucket of that
  /// name holds objects (409, as GCS answers a name taken), and answers the resource; the bucket
  /// is listed once something is written in it.
  func insertBucket(_ request: HTTPRequest, body: [UInt8], identity: Identity?) throws -> HTTPResponse {
    guard let identity else { throw AuthError.missingToken }
    guard identity.isAdmin else {
      throw AccessError.denied(reason: "buckets are created by admin identities (service accounts) only")
    }
    struct Insert: Decodable { var name: String }
    guard let name = try? JSONDecoder().decode(Insert.self, from: Data(body)).name else {
      throw LarderError.invalidArgument("the body must be a bucket resource with a name: {\"name\": \"my-bucket\"}")
    }
    if let problem = ObjectName.creatableBucketProblem(name) {
      throw LarderError.invalidBucket(name, reason: problem)
    }
    if try context.larder.objects.buckets().contains(name) {
      throw HTTPResponseError(.error(status: 409, message: "a bucket named \(name) already exists"))
    }
    return try GcsAPI.json(GcsBucketResource(name, base: base(request)), request: request)
  }

  func listBuckets(_ request: HTTPRequest, identity: Identity?) throws -> HTTPResponse {
    struct Listing: Encodable {
      var kind = "storage#buckets"
      var items: [GcsBucketResource]?
    }
    let base = base(request)
    let buckets = try context.larder.objects.buckets().filter { mayList($0, identity: identity) }
    return try GcsAPI.json(
      Listing(items: buckets.isEmpty ? nil : buckets.map { GcsBucketResource($0, base: base) }),
      request: request)
  }

  // MARK: - copy, rewrite, compose

  /// The destination's write options: the source's metadata, with what the request's resource sets.
  static func options(copying source: StoredObject, overriding body: [UInt8]) throws -> ObjectWriteOptions {
    let given = try FirebaseUploadMetadata.parse(body)
    let json = (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]) ?? [:]
    func pick(_ key: String, _ value: String?, _ fallback: String?) -> String? {
      json[key] == nil ? fallback : value.flatMap { $0.isEmpty ? nil : $0 }
    }
    return ObjectWriteOptions(
      declaredContentType: pick("contentType", given.contentType, source.contentType),
      filename: source.file.filename,
      metadata: json["metadata"] == nil ? source.metadata : given.metadata ?? [:],
      cacheControl: pick("cacheControl", given.cacheControl, source.cacheControl),
      contentDisposition: pick("contentDisposition", given.contentDisposition, source.contentDisposition),
      contentEncoding: pick("contentEncoding", given.contentEncoding, source.contentEncoding),
      contentLanguage: pick("contentLanguage", given.contentLanguage, source.contentLanguage))
  }

  func copy(
    _ request: HTTPRequest, body: [UInt8], from source: ObjectPath, to destination: ObjectPath,
    identity: Identity?,
    rewrite: Bool
  ) throws -> HTTPResponse {
    let sourceGeneration = try DecimalCount.query(request, "sourceGeneration")
    let sourceConditions = try GcsPreconditions(request, source: true)
    let conditions = try GcsPreconditions(request)
    // The source as the policy judged it for `get`; the copy is pinned to that very row.
    let object = try service.copy(
      from: source, to: destination, identity: identity, sourceGeneration: sourceGeneration,
      check: { try sourceConditions.check($0) }, options: { try Self.options(copying: $0, overriding: body) },
      admission: GcsAdmission(base: context.admission(for: identity), conditions: conditions))
    guard rewrite else { return try resource(object, request: request) }
    struct Rewrite: Encodable {
      var kind = "storage#rewriteResponse"
      var totalBytesRewritten: String
      var objectSize: String
      var done = true
      var resource: GcsObjectResource
    }
    let size = String(object.file.size)
    return try GcsAPI.json(
      Rewrite(
        totalBytesRewritten: size, objectSize: size,
        resource: GcsObjectResource(withChecksums(object), base: base(request))), request: request)
  }

  /// The most sources one `compose` takes, as in GCS.
  static let maxComposeSources = 32

  func compose(_ request: HTTPRequest, body: [UInt8], to destination: ObjectPath, identity: Identity?) throws
    -> HTTPResponse
  {
    guard let json = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
      let sources = json["sourceObjects"] as? [[String: Any]]
    else { throw LarderError.invalidArgument("compose needs a JSON body with sourceObjects") }
    guard (1...Self.maxComposeSources).contains(sources.count) else {
      throw LarderError.invalidArgument("compose takes 1 to \(Self.maxComposeSources) sourceObjects")
    }
    let conditions = try GcsPreconditions(request)
    let parsed = try sources.map { source -> ObjectService.ComposeSource in
      guard let name = source["name"] as? String else {
        throw LarderError.invalidArgument("every source object needs a name")
      }
      let preconditions = source["objectPreconditions"] as? [String: Any]
      return ObjectService.ComposeSource(
        name: name, generation: try Self.generation(source["generation"]),
        ifGenerationMatch: try Self.generation(preconditions?["ifGenerationMatch"]))
    }
    let resourceJSON = json["destination"].flatMap { try? JSONSerialization.data(withJSONObject: $0) }
    let given = try FirebaseUploadMetadata.parse(resourceJSON.map { Array($0) } ?? [])
    let object = try service.compose(
      parsed, to: destination, options: { given.writeOptions(declaredFallback: $0.contentType) }, identity: identity,
      check: { try conditions.check($0) }, charge: { try context.chargeWrite($0, request, identity: identity) },
      admission: GcsAdmission(base: context.admission(for: identity), conditions: conditions))
    return try resource(object, request: request)
  }

  /// A generation in a JSON body: a string of digits (as GCS writes them) or a number.
  static func generation(_ value: Any?) throws -> Int64? {
    switch value {
    case nil, is NSNull: return nil
    case let s as String:
      guard let n = DecimalCount.parse(s) else {
        throw LarderError.invalidArgument("generation must be a count")
      }
      return n
    case let n as NSNumber:
      guard n.int64Value >= 0 else { throw LarderError.invalidArgument("generation must be a count") }
      return n.int64Value
    default: throw LarderError.invalidArgument("generation must be a count")
    }
  }
}
