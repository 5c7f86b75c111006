import Foundation
import Larder
import LarderHTTP

/// tus 1.0.0 resumable uploads on `/v0/b/{bucket}/uploads`.
///
/// ```
/// OPTIONS /v0/b/{bucket}/uploads          capabilities (and CORS preflight)   → 200
/// POST    /v0/b/{bucket}/uploads          creation (+ body: creation-with-upload, Upload-Concat) → 201 Location
/// HEAD    /v0/b/{bucket}/uploads/{id}     Upload-Offset, Upload-Length | Upload-Defer-Length    → 200
/// PATCH   /v0/b/{bucket}/uploads/{id}     append (application/offset+octet-stream)             → 204
/// DELETE  /v0/b/{bucket}/uploads/{id}     termination                                          → 204
/// ```
/// Choices the protocol leaves open:
/// - A second `PATCH` while one is streaming gets **423 Locked** (tus-js-client retries on it);
///   the first is not interrupted, so an acknowledged offset is never disputed.
/// - An upload is visible only to the identity that created it (same uid; an anonymous upload
///   only to anonymous requests): for anyone else it does not exist (404).
/// - Expired uploads answer **410** until the collector removes them, then 404; a terminated one
///   answers 404. A published upload stays as a completed row (`Upload-Offset` = length) until it
///   expires, so a client whose last answer was lost sees it finished.
/// - A `PATCH` past `Upload-Length` gets 413 and none of its bytes past its last checkpoint are kept.
/// - A long `PATCH` commits what it received every 8 MiB or 2 s (a checkpoint: fsync, then the
///   offset), so a crash in the middle of one loses at most the bytes since the last one
///   (tus-js-client sends a whole file in one PATCH). Never the last byte (it needs the policy),
///   never under an `Upload-Checksum` (the chunk is only known good at its end).
/// - When a body breaks off, the bytes received are kept (fsync'ed and committed) unless an
///   `Upload-Checksum` guarded them, or they are the upload's last bytes (those need the policy).
/// - A final concatenation (up to the maximum upload size) is validated and recorded at once,
///   then copied and published on a thread of its own: the answer waits at most 500 ms for it,
///   so small ones are objects when answered and a large one never holds a server thread (which
///   serves other connections). Until it is published its `HEAD` has no `Upload-Offset` (as tus
///   says); if it fails afterwards (the policy refuses the real content) its `HEAD` answers
///   that error (403); one interrupted by a restart answers 410, and the client creates it
///   again from its partials. `HEAD` echoes its `Upload-Concat` exactly as it was sent.
/// - The policy is asked at creation (declared length and type) and when the last byte arrives
///   (real size, sniffed type, sha256) before the object becomes visible; denied at the end →
///   403 and the upload with its bytes is deleted. Partial uploads are not asked about (they have
///   no name and never become objects); the final concatenation is asked about both times.
struct TusEndpoint {
  let context: ServiceContext
  let store: UploadStore

  init(context: ServiceContext) {
    self.context = context
    store = context.uploads
  }

  static let exposedHeaders = [
    "Location", "Upload-Offset", "Upload-Length", "Upload-Metadata", "Upload-Defer-Length", "Upload-Expires",
    "Upload-Concat", "Tus-Resumable", "Tus-Version", "Tus-Extension", "Tus-Max-Size", "Tus-Checksum-Algorithm",
  ]
  static let requestHeaders = [
    "Authorization", "Content-Type", "Tus-Resumable", "Upload-Length", "Upload-Defer-Length", "Upload-Metadata",
    "Upload-Offset", "Upload-Checksum", "Upload-Concat", "X-HTTP-Method-Override",
  ]
  static let methods = "POST, HEAD, PATCH, DELETE, OPTIONS"

  /// Declares the tus routes. Every route honours `X-HTTP-Method-Override`, which only picks
  /// among these: an unknown override is a 405 counted as `unmatched`, never a new label.
  /// The collection also answers with a trailing slash (`/uploads/`, tusd's `/files/`).
  func register(in router: inout Router, cors: CORS) {
    let collection = "/v0/b/{bucket}/uploads"
    let item = "/v0/b/{bucket}/uploads/{id}"
    let tus: Router.Decorator = { response, request in Self.finish(&response, request: request) }
    router.add("POST", collection, route: "tus.create", options: .acceptsMethodOverride, decorate: tus) {
      request, params in
      let (bucket, identity) = try prelude(request, params)
      return HTTPHeadDecision(try create(request, bucket: bucket, identity: identity))
    }
    for pattern in [collection, item] {
      router.add("OPTIONS", pattern, route: "tus.options", options: .acceptsMethodOverride) { request, params in
        _ = try context.bucket(params)
        _ = try context.identity(request)
        return .respond(options(request, cors: cors))
      }
    }
    router.add("HEAD", item, route: "tus.head", options: .acceptsMethodOverride, decorate: tus) { request, params in
      let (bucket, identity) = try prelude(request, params)
      return .respond(try head(id: try params.decoded("id"), bucket: bucket, identity: identity))
    }
    router.add("PATCH", item, route: "tus.patch", options: .acceptsMethodOverride, decorate: tus) {
      request, params in
      let (bucket, identity) = try prelude(request, params)
      return HTTPHeadDecision(try patch(request, id: try params.decoded("id"), bucket: bucket, identity: identity))
    }
    router.add("DELETE", item, route: "tus.delete", options: .acceptsMethodOverride, decorate: tus) {
      request, params in
      let (bucket, identity) = try prelude(request, params)
      return .respond(try terminate(id: try params.decoded("id"), bucket: bucket, identity: identity))
    }
  }

  /// What every tus request but `OPTIONS` checks first: the bucket, the caller, the version.
  private func prelude(_ request: HTTPRequest, _ params: RouteParameters) throws -> (String, Identity?) {
    let bucket = try context.bucket(params)
    let identity = try context.identity(request)
    guard request.headers["Tus-Resumable"] == TusProtocol.version else {
      throw RequestError.unsupportedTusVersion(supported: TusProtocol.version)
    }
    return (bucket, identity)
  }

  // MARK: - OPTIONS

  func options(_ request: HTTPRequest, cors: CORS) -> HTTPResponse {
    var r = HTTPResponse(status: 200)
    r.headers.set("Tus-Resumable", TusProtocol.version)
    r.headers.set("Tus-Version", TusProtocol.version)
    r.headers.set("Tus-Extension", TusProtocol.extensions)
    r.headers.set("Tus-Max-Size", String(context.maxUploadSize))
    r.headers.set("Tus-Checksum-Algorithm", TusProtocol.checksumAlgorithms)
    cors.preflight(&r, request: request, methods: Self.methods)
    return r
  }

  // MARK: - POST (creation)

  func create(_ request: HTTPRequest, bucket: String, identity: Identity?) throws -> HTTPHeadDecision.Action {
    let concat = try TusProtocol.parseConcat(request.headers["Upload-Concat"], bucket: bucket)
    let metadata: [String: String]
    do {
      metadata = try TusMetadata.parse(request.headers["Upload-Metadata"] ?? "")
    } catch {
      throw TusProtocol.badRequest(error.description)
    }
    let lengthHeader = request.headers["Upload-Length"]
    let deferHeader = request.headers["Upload-Defer-Length"]
    if case .final(let ids) = concat {
      guard lengthHeader == nil, deferHeader == nil else {
        throw TusProtocol.badRequest(
          "a final upload takes no Upload-Length: it is the sum of its partial uploads")
      }
      let received = request.headers["Upload-Concat"]?.trimmingCharacters(in: .whitespaces)
      return .respond(
        try concatenate(
          ids, received: received, bucket: bucket, metadata: metadata, identity: identity, request: request))
    }
    var length: Int64?
    switch (lengthHeader, deferHeader) {
    case (let value?, nil):
      guard let n = DecimalCount.parse(value) else {
        throw TusProtocol.badRequest("Upload-Length must be a non-negative integer")
      }
      length = n
    case (nil, "1"?): length = nil
    case (nil, _?): throw TusProtocol.badRequest("Upload-Defer-Length must be 1")
    case (nil, nil): throw TusProtocol.badRequest("Upload-Length or Upload-Defer-Length: 1 is required")
    case (_?, _?): throw TusProtocol.badRequest("send either Upload-Length or Upload-Defer-Length, not both")
    }
    if let length, length > context.maxUploadSize { throw tooLarge() }
    let partial = concat == .partial
    let name = metadata["name"]
    // A partial upload is not an object yet. The rules decide on what it will become when the
    // client names it (`name` in Upload-Metadata); a nameless one is asked for as a `create` of
    // the pseudo-object `.partial`, which no rule matches unless it says so. Either way the
    // concatenated object is checked again, by its own name, at the end.
    let target: String
    if partial {
      target = name.flatMap { $0.isEmpty ? nil : $0 } ?? ".partial"
    } else {
      guard let name, !name.isEmpty else {
        throw TusProtocol.badRequest("Upload-Metadata must carry the object's name under the key 'name'")
      }
      target = name
    }
    let path = try ObjectPath(bucket: bucket, name: target)
    let options = UploadStore.objectOptions(metadata: metadata)
    try authorize(path, identity: identity, size: length, options: options)
    let withBody = request.headers["Content-Type"].map(Self.isOffsetStream) ?? false
    let checksum = withBody ? try TusProtocol.parseChecksum(request.headers["Upload-Checksum"]) : nil
    if let length, withBody, let declared = request.contentLength, declared > length {
      throw UploadError.exceedsLength(length: length)
    }
    let upload = try context.creatingUpload(request, identity: identity) {
      try store.create(
        bucket: bucket, name: name, owner: identity?.uid, length: length, metadata: metadata, partial: partial)
    }
    if withBody {
      let append = try store.beginAppend(
        upload, owner: identity?.uid, offset: 0, checksum: checksum, sizeLimit: context.maxUploadSize)
      append.expectedBodyLength = request.contentLength
      // A creation-with-upload answer, success or error, names the upload it created, so the
      // client can resume it.
      let location = self.location(of: upload)
      return .receiveBody(
        try terminatingOnRefusal(upload, identity: identity) {
          try context.charged(
            UploadAppendSink(
              append, keepReceivedOnBreak: true,
              decorate: { r in
                if r.status == 204 { r.status = 201 }
                r.headers.set("Location", location)
                if !r.headers.contains("Upload-Expires") { r.headers.set("Upload-Expires", HTTPDate.format(upload.expiresAt)) }
              },
              complete: { try self.complete($0, identity: identity) }), request, identity: identity)
        })
    }
    if length == 0 && !partial {
      // Nothing to wait for: complete it now.
      let append = try store.beginAppend(upload, owner: identity?.uid, offset: 0)
      var r = try complete(append, identity: identity)
      r.status = 201
      r.headers.set("Location", location(of: upload))
      return .respond(r)
    }
    var r = HTTPResponse(status: 201)
    r.headers.set("Location", location(of: upload))
    r.headers.set("Upload-Expires", HTTPDate.format(upload.expiresAt))
    return .respond(r)
  }

  /// How long a final `POST` waits for its concatenation before answering 201 with the final
  /// upload still being made: enough to copy and hash a few hundred MiB, so most clients can
  /// read the object as soon as they are answered, while a server thread (which serves other
  /// connections too) is never held for the copy of gigabytes.
  static let concatenationWait: Duration = .milliseconds(500)

  /// Validates and records the final upload here, then copies and publishes on the upload
  /// store's queue (see ``UploadStore/concatenate(_:wait:publish:)``).
  func concatenate(
    _ ids: [String], received: String?, bucket: String, metadata: [String: String], identity: Identity?,
    request: HTTPRequest
  ) throws -> HTTPResponse {
    guard let name = metadata["name"], !name.isEmpty else {
      throw TusProtocol.badRequest("Upload-Metadata must carry the object's name under the key 'name'")
    }
    let path = try ObjectPath(bucket: bucket, name: name)
    let options = UploadStore.objectOptions(metadata: metadata)
    let concatenation: UploadStore.Concatenation
    do {
      concatenation = try store.prepareConcatenation(
        bucket: bucket, name: name, owner: identity?.uid, metadata: metadata, partials: ids, received: received,
        sizeLimit: context.maxUploadSize
      ) { total in
        try authorize(path, identity: identity, size: total, options: options)
        // A partial may be named many times, and is kept: the copy is new content, charged whole.
        try context.chargeWrite(total, request, identity: identity)
      }
    } catch LarderError.sizeLimitExceeded {
      throw tooLarge()
    }
    let endpoint = self
    let outcome = store.concatenate(concatenation, wait: Self.concatenationWait) { completed in
      try endpoint.publish(completed, identity: identity)
    }
    if case .failure(let error) = outcome { throw error }
    let final = concatenation.upload
    var r = HTTPResponse(status: 201)
    r.headers.set("Location", location(of: final))
    r.headers.set("Upload-Expires", HTTPDate.format(final.expiresAt))
    return r
  }

  // MARK: - HEAD

  func head(id: String, bucket: String, identity: Identity?) throws -> HTTPResponse {
    let upload = try lookup(id: id, bucket: bucket, identity: identity)
    var r = HTTPResponse(status: 200)
    r.headers.set("Cache-Control", "no-store")
    if case .final = upload.concat, upload.completedAt == nil {
      // tus: no Upload-Offset until the concatenation is finished. One no longer running here
      // was interrupted by a restart: its bytes were never made (the partials are still there).
      guard store.isConcatenating(upload.id) else {
        // It may have ended between the lookup above and this check: a failure is remembered,
        // and a success committed, before it stops counting as running, so a second look
        // answers that (the refusal, or the finished upload) instead of "interrupted".
        let again = try lookup(id: id, bucket: bucket, identity: identity)
        guard again.completedAt != nil else { throw UploadError.dataLost(id: upload.id) }
        return try head(id: id, bucket: bucket, identity: identity)
      }
    } else {
      r.headers.set("Upload-Offset", String(upload.offset))
    }
    if let length = upload.length {
      r.headers.set("Upload-Length", String(length))
    } else {
      r.headers.set("Upload-Defer-Length", "1")
    }
    if !upload.metadata.isEmpty { r.headers.set("Upload-Metadata", TusMetadata.encode(upload.metadata)) }
    r.headers.set("Upload-Expires", HTTPDate.format(upload.expiresAt))
    switch upload.concat {
    case .partial: r.headers.set("Upload-Concat", "partial")
    case .final(let ids):
      // As the client sent it (absolute URLs stay absolute); rebuilt only for older rows.
      r.headers.set(
        "Upload-Concat",
        upload.receivedConcat ?? "final;" + ids.map { path(bucket: bucket, id: $0) }.joined(separator: " "))
    case nil: break
    }
    return r
  }

  // MARK: - PATCH

  func patch(_ request: HTTPRequest, id: String, bucket: String, identity: Identity?) throws
    -> HTTPHeadDecision.Action
  {
    guard request.headers["Content-Type"].map(Self.isOffsetStream) == true else {
      throw RequestError.unsupportedMediaType(expected: TusProtocol.offsetContentType)
    }
    guard let offset = request.headers["Upload-Offset"].flatMap({ DecimalCount.parse($0) }) else {
      throw TusProtocol.badRequest("Upload-Offset must be a non-negative integer")
    }
    var declared: Int64?
    if let value = request.headers["Upload-Length"] {
      guard let n = DecimalCount.parse(value) else {
        throw TusProtocol.badRequest("Upload-Length must be a non-negative integer")
      }
      if n > context.maxUploadSize { throw tooLarge() }
      declared = n
    }
    let checksum = try TusProtocol.parseChecksum(request.headers["Upload-Checksum"])
    let upload = try lookup(id: id, bucket: bucket, identity: identity)
    if upload.completedAt != nil, offset == upload.offset, (request.contentLength ?? 0) == 0 {
      // A retry of the last PATCH whose answer was lost: it is done.
      return .respond(progressResponse(upload))
    }
    // A body that cannot fit is refused from its head, before the upload's lease is taken (the
    // append enforces the same limits on the bytes themselves, should the length change since).
    // Only where the append would be allowed at all: a wrong offset, a final or a completed
    // upload keep their own answers, which the store gives.
    if let body = request.contentLength, offset == upload.offset, upload.completedAt == nil, !upload.isFinal {
      if let length = upload.length ?? declared.flatMap({ $0 >= offset ? $0 : nil }), offset + body > length {
        throw UploadError.exceedsLength(length: length)
      }
      if offset + body > context.maxUploadSize { throw tooLarge() }
    }
    let append = try store.beginAppend(
      upload, owner: identity?.uid, offset: offset, length: declared, checksum: checksum,
      sizeLimit: context.maxUploadSize)
    append.expectedBodyLength = request.contentLength
    return .receiveBody(
      try context.charged(
        UploadAppendSink(append, keepReceivedOnBreak: true) { try self.complete($0, identity: identity) }, request,
        identity: identity))
  }

  /// `start()`, or nothing left of `upload` when it throws: a creation-with-upload whose body the
  /// write quota refuses creates nothing (the client is never told the upload's location).
  func terminatingOnRefusal<T>(_ upload: Upload, identity: Identity?, _ start: () throws -> T) throws -> T {
    do {
      return try start()
    } catch {
      try? store.terminate(id: upload.id, owner: identity?.uid)
      throw error
    }
  }

  /// Ends an append: commits progress, or asks the policy and publishes.
  func complete(_ append: UploadAppend, identity: Identity?) throws -> HTTPResponse {
    switch try append.finish() {
    case .progress(let upload):
      return progressResponse(upload)
    case .complete(let completed):
      try publish(completed, identity: identity)
      return progressResponse(completed.upload)
    }
  }

  /// Publishes, asking the policy inside the write on the real content and the row it
  /// replaces. A denial deletes the upload (403); any other failure (a busy catalog…) rolls it
  /// back to its last acknowledged offset: the client resends.
  func publish(_ completed: CompletedUpload, identity: Identity?) throws {
    _ = try store.publish(completed, admission: context.admission(for: identity))
  }

  func progressResponse(_ upload: Upload) -> HTTPResponse {
    var r = HTTPResponse(status: 204)
    r.headers.set("Upload-Offset", String(upload.offset))
    r.headers.set("Upload-Expires", HTTPDate.format(upload.expiresAt))
    return r
  }

  // MARK: - DELETE

  func terminate(id: String, bucket: String, identity: Identity?) throws -> HTTPResponse {
    _ = try lookup(id: id, bucket: bucket, identity: identity)
    try store.terminate(id: id, owner: identity?.uid)
    return HTTPResponse(status: 204)
  }

  // MARK: - helpers

  func lookup(id: String, bucket: String, identity: Identity?) throws -> Upload {
    let upload = try store.upload(id: id, owner: identity?.uid)
    guard upload.bucket.hasSameBytes(as: bucket) else { throw UploadError.notFound(id: id) }
    return upload
  }

  /// Asks on what the client declares (before any byte); the admission step asks again on the
  /// real content when the upload is published.
  func authorize(_ path: ObjectPath, identity: Identity?, size: Int64?, options: ObjectWriteOptions) throws {
    _ = try ObjectService(context: context).judgeWrite(
      .declared(bucket: path.bucket, name: path.name, size: size, options: options), at: path,
      identity: identity)
  }

  func tooLarge() -> RequestError {
    .uploadTooLarge(limit: context.maxUploadSize)
  }

  static func isOffsetStream(_ contentType: String) -> Bool {
    contentType.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
      == TusProtocol.offsetContentType
  }

  func path(bucket: String, id: String) -> String {
    "/v0/b/\(PercentEncoding.encodeComponent(bucket))/uploads/\(id)"
  }

  func location(of upload: Upload) -> String {
    let path = path(bucket: upload.bucket, id: upload.id)
    guard var base = context.publicURL, !base.isEmpty else { return path }
    while base.hasSuffix("/") { base.removeLast() }
    return base + path
  }

  /// Adds what every tus answer carries, errors included: `Tus-Resumable`, and no body on
  /// `HEAD` or 204.
  static func finish(_ r: inout HTTPResponse, request: HTTPRequest) {
    r.headers.set("Tus-Resumable", TusProtocol.version)
    if request.method == "HEAD" || r.status == 204 { r.body = .empty }
  }
}
