import Foundation
import Larder
import LarderCrypto
import LarderHTTP

/// Firebase Storage's object REST API.
///
/// ```
/// POST   /v0/b/{bucket}/o?name={name}        upload (raw body)            → 200 metadata
/// GET    /v0/b/{bucket}/o/{name}             metadata
/// GET    /v0/b/{bucket}/o/{name}?alt=media   content: Range, conditionals, maxSize, token
/// HEAD   /v0/b/{bucket}/o/{name}[?alt=media] headers only
/// PATCH  /v0/b/{bucket}/o/{name}             update metadata (JSON)
/// DELETE /v0/b/{bucket}/o/{name}                                          → 204
/// GET    /v0/b/{bucket}/o?prefix=&delimiter=&maxResults=&pageToken=       list
/// ```
///
/// An adapter over ``ObjectService``: it parses requests and shapes answers as Firebase does.
struct ObjectsEndpoint {
  let context: ServiceContext
  /// Made once: a request's handler asks it several times, and making one copies the context.
  let service: ObjectService

  init(context: ServiceContext) {
    self.context = context
    service = ObjectService(context: context)
  }

  /// Response headers a browser script may read: object answers, and Firebase's resumable
  /// upload protocol (`X-Goog-Upload-*`).
  static let exposedHeaders = [
    "ETag", "Content-Range", "Content-Length", "Location", "X-Goog-Upload-URL", "X-Goog-Upload-Status",
    "X-Goog-Upload-Size-Received", "X-Goog-Upload-Chunk-Granularity", "X-Goog-Upload-Control-URL",
  ]
  /// Request headers a preflight offers: ours, and the Firebase Storage SDKs'.
  static let requestHeaders = [
    "Authorization", "Content-Type", "Range", "If-None-Match", "If-Match", "X-Goog-Meta-*",
    "X-Goog-Upload-Protocol", "X-Goog-Upload-Command", "X-Goog-Upload-Offset",
    "X-Goog-Upload-Header-Content-Length", "X-Goog-Upload-Header-Content-Type", "X-Firebase-Storage-Version",
    "X-Firebase-GMPID", "X-Firebase-AppCheck",
  ]
  static let methods = "GET, HEAD, POST, PATCH, DELETE, OPTIONS"

  /// Declares the object routes. Order matters where a path is shared: `alt=media` selects
  /// `objects.download` before `objects.get`, and the order gives `Allow`.
  func register(in router: inout Router, cors: CORS) {
    let collection = "/v0/b/{bucket}/o"
    let item = "/v0/b/{bucket}/o/{name}"
    router.add("GET", collection, route: "objects.list", options: .noHeadFallback) { request, params in
      let bucket = try context.bucket(params)
      return .respond(try list(request, bucket: bucket, identity: try context.identity(request)))
    }
    router.add("POST", collection, route: "objects.upload") { request, params in
      let bucket = try context.bucket(params)
      let identity = try context.identity(request)
      // Firebase's multipart and resumable protocols (and refusals of any other): never raw bytes.
      if FirebaseUploads.applies(to: request) {
        return HTTPHeadDecision(try FirebaseUploads(context: context).handle(request, bucket: bucket, identity: identity))
      }
      return .receiveBody(try upload(request, bucket: bucket, identity: identity))
    }
    let preflight: Router.Handler = { request, params in
      _ = try context.bucket(params)
      var r = HTTPResponse(status: 204)
      cors.preflight(&r, request: request, methods: Self.methods)
      return .respond(r)
    }
    router.add("OPTIONS", collection, route: "objects.preflight", preflight)
    for method in ["GET", "HEAD"] {
      for (query, label) in [(["alt": "media"], "objects.download"), ([:], "objects.get")] {
        router.add(method, item, query: query, route: label) { request, params in
          let (path, identity) = try target(request, params)
          return .respond(try read(request, path: path, identity: identity, media: label == "objects.download"))
        }
      }
    }
    router.add("PATCH", item, route: "objects.patch") { request, params in
      let (path, identity) = try target(request, params)
      return .receiveBody(BufferedBodySink { body in try self.patch(body, path: path, identity: identity) })
    }
    router.add("DELETE", item, route: "objects.delete") { request, params in
      let (path, identity) = try target(request, params)
      return .respond(try delete(request, path: path, identity: identity))
    }
    router.add("OPTIONS", item, route: "objects.preflight", preflight)
  }

  /// The bucket, caller and object name of an item route, checked in that order: the name is
  /// validated here, once, into the ``ObjectPath`` the store takes as it is.
  private func target(_ request: HTTPRequest, _ params: RouteParameters) throws -> (ObjectPath, Identity?) {
    let bucket = try context.bucket(params)
    let identity = try context.identity(request)
    return (try ObjectPath(bucket: bucket, name: try params.decoded("name")), identity)
  }

  // MARK: upload

  func upload(
    _ request: HTTPRequest, bucket: String, identity: Identity?, completion: WriteCompletion? = nil
  ) throws -> any HTTPBodySink {
    if let type = request.queryValue("uploadType"), type != "media" {
      throw LarderError.invalidArgument(
        "uploadType '\(type.prefix(40))' is not supported here; use uploadType=media or the tus endpoint /v0/b/\(bucket)/uploads")
    }
    guard let name = request.queryValue("name") else {
      throw LarderError.invalidArgument("the object name is required: POST /v0/b/\(bucket)/o?name=NAME")
    }
    return try upload(
      request, path: try ObjectPath(bucket: bucket, name: name), identity: identity, completion: completion)
  }

  /// A simple upload of the request's body as the object at `path` (`X-Goog-Meta-*`, `Content-MD5`,
  /// the size limit, the policy before and inside the write); also a V4 signed URL's `PUT`.
  func upload(
    _ request: HTTPRequest, path: ObjectPath, identity: Identity?, completion: WriteCompletion? = nil
  ) throws -> any HTTPBodySink {
    let (bucket, name) = (path.bucket, path.name)
    if let length = request.contentLength, length > context.maxUploadSize {
      throw LarderError.sizeLimitExceeded(limit: context.maxUploadSize)
    }
    if request.contentLength == nil && request.headers["Transfer-Encoding"] == nil {
      throw RequestError.lengthRequired
    }
    var metadata: [String: String] = [:]
    for field in request.headers {
      let lower = field.name.lowercased()
      for prefix in ["x-goog-meta-", "x-larder-meta-"] where lower.hasPrefix(prefix) && lower.count > prefix.count {
        metadata[String(lower.dropFirst(prefix.count))] = field.value
      }
    }
    var expectedMD5: [UInt8]?
    if let md5 = request.headers["Content-MD5"] {
      guard let data = Data(base64Encoded: md5), data.count == 16 else {
        throw LarderError.invalidArgument("Content-MD5 must be the base64 of 16 bytes")
      }
      expectedMD5 = Array(data)
    }
    let options = ObjectWriteOptions(
      declaredContentType: request.headers["Content-Type"], metadata: metadata,
      cacheControl: request.headers["X-Goog-Cache-Control"] ?? request.queryValue("cacheControl"),
      contentDisposition: request.headers["X-Goog-Content-Disposition"] ?? request.queryValue("contentDisposition"),
      contentEncoding: request.headers["X-Goog-Content-Encoding"] ?? request.queryValue("contentEncoding"),
      contentLanguage: request.headers["X-Goog-Content-Language"] ?? request.queryValue("contentLanguage"),
      ifGenerationMatch: try DecimalCount.query(request, "ifGenerationMatch"))
    // These become response headers on download: refused now, before a byte is stored.
    try options.validate()
    // Asked once before reading a byte, on what the client declares and the row there now; asked
    // again inside the write only if the answer depends on the bytes or the row changes.
    let judged = try service.judgeWrite(
      .declared(bucket: bucket, name: name, size: request.contentLength, options: options), at: path,
      identity: identity, check: completion?.check ?? { _ in })
    return try context.charged(
      ObjectUploadSink(
        context: context, path: path, identity: identity, options: options, expectedMD5: expectedMD5,
        judged: judged, declaredSize: request.contentLength, completion: completion), request, identity: identity)
  }

  // MARK: read

  func read(_ request: HTTPRequest, path: ObjectPath, identity: Identity?, media: Bool) throws -> HTTPResponse {
    let (object, memo) = try service.read(
      path, identity: identity, token: request.queryValue("token"), media: media)
    guard media else {
      // Encoded once per cached row: JSON encoding and its dates were most of a metadata GET.
      var r = memo?.value { MetadataAnswer(object) }.response ?? MetadataAnswer(object).response
      if request.method == "HEAD" { r.body = .lengthOnly(r.body.length) }
      return r
    }
    let head = { memo?.value { DownloadHead(object) } ?? DownloadHead(object) }
    return try mediaDownload(request, object: object, identity: identity, memo: memo, head: head).response
  }

  /// `alt=media` of an object the caller may read: its bytes, or those of the image variant the
  /// request asks of it (``ImageVariantDownload``), with `Vary: Accept` when the variant's format
  /// came from `Accept`. Every download URL (Firebase, GCS, V4 signed) comes here, so a variant is
  /// served wherever, and only where, its source is.
  ///
  /// `prepare` completes the variant's row before its headers are made (GCS adds its checksums);
  /// `head` gives the source's (memoised where the caller has it); `memo` is the cached row's,
  /// for a caller that serves `object` as that row has it and prepares nothing. Returns the
  /// object served.
  func mediaDownload(
    _ request: HTTPRequest, object: StoredObject, identity: Identity?,
    prepare: (StoredObject) -> StoredObject = { $0 }, memo: ObjectMemo? = nil, head: () -> DownloadHead
  ) throws -> (response: HTTPResponse, served: StoredObject) {
    guard
      let variant = try ImageVariantDownload.variant(
        of: object, request, identity: identity, context: context, memo: memo)
    else {
      return (try download(request, object: object, head: head()), object)
    }
    let served = variant.inline == nil ? prepare(variant.object) : variant.object
    var r = try download(
      request, object: served, head: variant.head ?? DownloadHead(served), inline: variant.inline)
    if variant.negotiated { r.headers.set("Vary", "Accept") }
    return (r, served)
  }

  /// An object's metadata answer (`GET …/o/{name}`), the same for every caller who may read it.
  struct MetadataAnswer: Sendable {
    let response: HTTPResponse
    init(_ object: StoredObject) {
      var response = HTTPResponse.json(object.firebaseMetadata)
      response.headers = response.headers.sealed()
      self.response = response
    }
  }

  /// What every download of one object answers, whatever the request asks: its validators and
  /// headers, prepared once per cached row (see ``ObjectMemo``) instead of per request.
  struct DownloadHead: Sendable {
    let etag: String
    let lastModified: Date
    /// `ETag` … `X-Goog-Metageneration`: where every answer's headers begin.
    let common: HTTPHeaders
    /// `Content-Type` … `Content-Security-Policy`: after `Content-Range` on a 206.
    let content: HTTPHeaders
    /// `common` then `content`: the headers of a 200, whole.
    let full: HTTPHeaders

    init(_ object: StoredObject) {
      etag = "\"\(object.file.sha256)\""
      lastModified = object.timeCreated
      var common = HTTPHeaders(capacity: 7)
      common.add("ETag", etag)
      common.add("Last-Modified", HTTPDate.format(lastModified))
      common.add("Accept-Ranges", "bytes")
      common.add("Cache-Control", object.cacheControl ?? "private, max-age=0")
      common.add("X-Content-Type-Options", "nosniff")
      common.add("X-Goog-Generation", String(object.generation))
      common.add("X-Goog-Metageneration", String(object.metageneration))
      // The declared type, as Firebase serves it. Safe however it was declared: `nosniff` stops a
      // browser from guessing past it, the CSP sandboxes whatever renders, and content that either
      // type says a browser would run goes out as an attachment.
      var content = HTTPHeaders(capacity: 5)
      content.add("Content-Type", object.contentType)
      content.add("Content-Disposition", ObjectsEndpoint.contentDisposition(for: object))
      if let encoding = object.contentEncoding, encoding.lowercased() != "identity" {
        content.add("Content-Encoding", encoding)
      }
      if let language = object.contentLanguage { content.add("Content-Language", language) }
      content.add("Content-Security-Policy", "default-src 'none'; sandbox")
      // Sealed: their wire form is worked out once per cached row, not per answer.
      self.common = common.sealed()
      self.content = content.sealed()
      var full = self.common
      full.append(contentsOf: self.content)
      self.full = full
    }
  }

  /// Bodies up to this size are read into memory instead of sent with sendfile.
  static let inlineBodyLimit: Int64 = 16 * 1024

  /// `inline`: the object's bytes when they are in memory and not in the store (a variant the
  /// cache did not keep).
  func download(_ request: HTTPRequest, object: StoredObject, head: DownloadHead, inline: [UInt8]? = nil) throws
    -> HTTPResponse
  {
    let maxSize = try DecimalCount.query(request, "maxSize")
    let size = object.file.size
    let etag = head.etag

    switch Conditional.evaluate(request, etag: etag, lastModified: head.lastModified) {
    case .preconditionFailed:
      var r = HTTPResponse.error(status: 412, message: "precondition failed")
      r.headers.set("ETag", etag)
      return r
    case .notModified:
      var r = HTTPResponse(status: 304)
      for name in ["ETag", "Last-Modified", "Cache-Control"] { if let v = head.common[name] { r.headers.set(name, v) } }
      return r
    case .proceed(let honourRange):
      var range = ByteRange.full
      if honourRange { range = ByteRange.parse(request.headers["Range"], size: size) }
      if range == .unsatisfiable {
        var r = HTTPResponse.error(status: 416, message: "range not satisfiable; the object is \(size) bytes")
        r.headers.set("Content-Range", "bytes */\(size)")
        return r
      }
      var first: Int64 = 0
      var length = size
      var status = 200
      var headers = head.full
      if case .partial(let f, let l) = range {
        first = f
        length = l - f + 1
        status = 206
        headers = head.common
        headers.add("Content-Range", "bytes \(f)-\(l)/\(size)")
        headers.append(contentsOf: head.content)
      }
      if let maxSize, length > maxSize {
        // Refused before any content byte: the client learns the size and its limit.
        throw LarderError.downloadSizeExceeded(size: length, maxSize: maxSize)
      }
      if request.method == "HEAD" {
        // A HEAD reads no byte, but answers as the GET would when the content is damaged or lost.
        try context.larder.files.requireContent(object.file)
        return HTTPResponse(status: status, headers: headers, body: .lengthOnly(length))
      }
      if let inline {
        return HTTPResponse(
          status: status, headers: headers, body: .bytes(Array(inline[Int(first)..<Int(first + length)])))
      }
      if length <= Self.inlineBodyLimit, let content = try context.larder.objects.smallContent(of: object) {
        // A small blob's bytes come from memory once read (no open, fstat, pread, close).
        let bytes = first == 0 && length == size ? content : Array(content[Int(first)..<Int(first + length)])
        return HTTPResponse(status: status, headers: headers, body: .bytes(bytes))
      }
      guard let reader = try context.larder.files.openLocal(object.file) else {
        // Not a local file (S3): streamed from the store.
        let body = try Self.remoteBody(context.larder.files, object.file, range: first..<(first + length))
        return HTTPResponse(status: status, headers: headers, body: body)
      }
      guard reader.size == size else {
        throw LarderError.corruptContent(sha256: object.file.sha256)
      }
      if length <= Self.inlineBodyLimit {
        // Small bodies go out from memory with the headers in one send; sendfile would cost
        // a second system call per request for a few KiB.
        let bytes = try reader.read(first..<(first + length))
        guard bytes.count == Int(length) else { throw LarderError.corruptContent(sha256: object.file.sha256) }
        return HTTPResponse(status: status, headers: headers, body: .bytes(Array(bytes)))
      }
      let body = HTTPFileBody(takingOwnershipOf: reader.takeDescriptor(), offset: first, length: length)
      return HTTPResponse(status: status, headers: headers, body: .file(body))
    }
  }

  /// A download's body when the blobs are in S3: small ones from memory, the rest streamed
  /// from the store to the client (``HTTPStreamBody``) in bounded memory. The GET starts here,
  /// so a store that is down answers 503 before any header is sent.
  static func remoteBody(_ files: FileStore, _ file: File, range: Range<Int64>) throws -> HTTPResponse.Body {
    if Int64(range.count) <= inlineBodyLimit {
      var bytes: [UInt8] = []
      try files.read(file, range: range) { bytes.append(contentsOf: $0) }
      guard bytes.count == range.count else { throw LarderError.corruptContent(sha256: file.sha256) }
      return .bytes(bytes)
    }
    return .stream(try HTTPStreamBody(length: Int64(range.count)) { write in try files.read(file, range: range, write) })
  }

  /// Types a browser would render or run are always sent as attachments, whether the client
  /// declared such a type or libmagic found one (text declared as `text/plain` may be HTML).
  static func contentDisposition(for object: StoredObject) -> String {
    let active = isActiveContent(object.contentType) || isActiveContent(object.detectedContentType)
    let filename = object.file.filename ?? object.name.split(separator: "/").last.map(String.init) ?? "download"
    if let custom = object.contentDisposition, !active { return custom }
    // RFC 5987 allows a few more characters unescaped; encoding them too is equally valid.
    return "\(active ? "attachment" : "inline"); filename*=UTF-8''\(PercentEncoding.encodeComponent(filename))"
  }

  /// Whether a browser would render or run this type (HTML, SVG, XML, scripts, PDF, Flash).
  ///
  /// Matched on ASCII bytes: this runs on every download, and Foundation's `contains` was a
  /// measurable share of a small GET's CPU.
  static func isActiveContent(_ contentType: String) -> Bool {
    var lower = Array(contentType.utf8)
    for i in lower.indices where lower[i] >= 0x41 && lower[i] <= 0x5A { lower[i] |= 0x20 }
    func has(_ needle: StaticString) -> Bool {
      let n = UnsafeBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount)
      guard n.count <= lower.count else { return false }
      for start in 0...(lower.count - n.count) where lower[start] == n[0] {
        if lower[start..<(start + n.count)].elementsEqual(n) { return true }
      }
      return false
    }
    return has("html") || has("svg") || has("javascript") || has("ecmascript") || has("xml")
      || has("application/pdf") || has("x-shockwave")
  }

  // MARK: patch, delete, list

  func patch(_ body: [UInt8], path: ObjectPath, identity: Identity?) throws -> HTTPResponse {
    let updated = try service.update(try Self.parsePatch(body), path: path, identity: identity)
    return writeResponse(updated, identity: identity)
  }

  /// A PATCH body as a change: `null` clears a field, `metadata` merges (a key set to `null` goes,
  /// `metadata: null` clears all). With `replacing` (GCS's `PUT`, an update of the whole
  /// resource) a writable field that is absent is cleared too. Fields in `ignoring` are skipped.
  static func parsePatch(_ body: [UInt8], replacing: Bool = false, ignoring: Set<String> = []) throws -> ObjectPatch {
    guard let json = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
      throw LarderError.invalidArgument("the body must be a JSON object")
    }
    var patch = ObjectPatch()
    func stringOrNull(_ key: String) throws -> String?? {
      guard let value = json[key] else { return replacing ? .some(nil) : nil }
      if value is NSNull { return .some(nil) }
      guard let s = value as? String else { throw LarderError.invalidArgument("\(key) must be a string or null") }
      return .some(s)
    }
    // null resets a field: `contentType` to application/octet-stream, the others to unset.
    patch.contentType = try stringOrNull("contentType")
    patch.cacheControl = try stringOrNull("cacheControl")
    patch.contentDisposition = try stringOrNull("contentDisposition")
    patch.contentEncoding = try stringOrNull("contentEncoding")
    patch.contentLanguage = try stringOrNull("contentLanguage")
    if let metadata = json["metadata"] {
      if metadata is NSNull {
        // Cleared inside the update's transaction, so keys added meanwhile go too.
        patch.clearMetadata = true
      } else {
        guard let map = metadata as? [String: Any] else { throw LarderError.invalidArgument("metadata must be an object") }
        var changes: [String: String?] = [:]
        for (k, v) in map {
          if v is NSNull {
            changes[k] = .some(nil)
          } else if let s = v as? String {
            changes[k] = s
          } else {
            throw LarderError.invalidArgument("metadata values must be strings or null")
          }
        }
        patch.metadata = changes
        patch.clearMetadata = replacing
      }
    } else if replacing {
      patch.clearMetadata = true
    }
    if let rotate = json["rotateDownloadToken"] {
      guard let flag = rotate as? Bool else { throw LarderError.invalidArgument("rotateDownloadToken must be a boolean") }
      patch.rotateDownloadToken = flag
    }
    if let unknown = json.keys.first(where: {
      !Self.writableFields.contains($0) && !Self.readOnlyFields.contains($0) && !ignoring.contains($0)
    }) {
      throw LarderError.invalidArgument("field '\(unknown.prefix(60))' cannot be changed")
    }
    return patch
  }

  /// What a PATCH may change (`rotateDownloadToken` is Larder's own).
  static let writableFields: Set<String> = [
    "contentType", "cacheControl", "contentDisposition", "contentEncoding", "contentLanguage", "metadata",
    "rotateDownloadToken",
  ]

  /// Fields of a metadata resource a PATCH ignores, whatever their value: the SDKs send back what
  /// `getMetadata` returned (the JS SDK's `updateMetadata` sends `name` and `md5Hash`), and
  /// Firebase ignores them too. Any other field is refused, so a misspelt one is not lost silently.
  static let readOnlyFields: Set<String> = [
    "name", "bucket", "generation", "metageneration", "size", "md5Hash", "crc32c", "etag", "timeCreated", "updated",
    "timeStorageClassUpdated", "downloadTokens", "sha256", "detectedContentType", "declaredContentType", "fullPath",
    "storageClass", "kind", "id", "selfLink", "mediaLink", "type",
  ]

  func delete(_ request: HTTPRequest, path: ObjectPath, identity: Identity?) throws -> HTTPResponse {
    try service.delete(path, identity: identity, ifGenerationMatch: try DecimalCount.query(request, "ifGenerationMatch"))
    return HTTPResponse(status: 204)
  }

  func list(_ request: HTTPRequest, bucket: String, identity: Identity?) throws -> HTTPResponse {
    let page = try listing(request, bucket: bucket, identity: identity)
    struct Item: Encodable {
      var name: String
      var bucket: String
    }
    struct Listing: Encodable {
      var prefixes: [String]
      var items: [Item]
      var nextPageToken: String?
    }
    // Items are `{name, bucket}` only, as Firebase lists them: `list` may be allowed where `get`
    // is not (a drop box), and permission to list does not grant an object's metadata (nor its
    // download token, which grants the content).
    return .json(
      Listing(
        prefixes: page.prefixes, items: page.items.map { Item(name: $0.name, bucket: $0.bucket) },
        nextPageToken: page.nextPageToken))
  }

  /// One page of a listing (`prefix`, `delimiter`, `maxResults`, `pageToken`, and `range`) with
  /// only the entries the caller may list: rules see the folder being listed, and each entry's
  /// own folder when the listing reaches into subfolders.
  func listing(
    _ request: HTTPRequest, bucket: String, identity: Identity?, range: ListingRange = .init(),
    maxResultsCap: Int64 = .max
  ) throws -> ObjectListing {
    let maxResults = try DecimalCount.query(request, "maxResults").map { Int(clamping: min($0, maxResultsCap)) } ?? 1000
    return try service.list(
      bucket: bucket, prefix: request.queryValue("prefix") ?? "",
      delimiter: request.queryValue("delimiter").flatMap { $0.isEmpty ? nil : $0 }, maxResults: maxResults,
      pageToken: request.queryValue("pageToken"), identity: identity, range: range)
  }

  /// An object's metadata as answered to a write (upload, PATCH): `downloadTokens` only for a
  /// caller who may also `get` it. Otherwise a create-only drop box or an update-only rule
  /// (e.g. "may change metadata.likes") would hand out tokens that grant the content.
  ///
  /// With `withMD5` (the Firebase upload protocols, whose SDKs hand `md5Hash` to the app as part of
  /// the finished upload's metadata) an MD5 not known yet is computed now, after the commit (and
  /// recorded); other answers omit it until the background hasher has it (``MD5Backfill``).
  func writeResponse(_ object: StoredObject, identity: Identity?, withMD5: Bool = false) -> HTTPResponse {
    var object = context.knowingMD5(object)
    if withMD5, object.file.md5.isEmpty, let file = try? context.larder.files.withMD5(object.file) {
      object.file = file
    }
    return .json(object.firebaseMetadata(includingTokens: service.mayGet(object, identity: identity)))
  }
}
