import Foundation
import Larder
import LarderHTTP

/// The GCS JSON API's uploads, on the Firebase upload paths they share the store with.
///
/// ```
/// POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name=N        raw body → 200 resource
/// POST /upload/storage/v1/b/{bucket}/o?uploadType=multipart           multipart/related (JSON, content) → 200
/// POST /upload/storage/v1/b/{bucket}/o?uploadType=resumable           JSON resource → 200, Location: session URI
/// PUT  <session URI>  Content-Range: bytes a-b/N | bytes a-b/*        a chunk → 308 Range: bytes=0-X, or 200 resource
/// PUT  <session URI>  Content-Range: bytes a-*/N | bytes a-*/*        the rest, of a length known when it ends
/// PUT  <session URI>  Content-Range: bytes */N | bytes */*, no body   status → 308 (or the finish at N)
/// DELETE <session URI>                                                → 499, the session and its bytes go
/// ```
/// Media uploads are the Firebase simple upload (``ObjectsEndpoint/upload(_:bucket:identity:completion:)``),
/// multipart ones its `multipart/related` sink (``FirebaseMultipartSink``), both answered with the
/// GCS resource and judged with the GCS preconditions in the admission step. Resumable sessions
/// are uploads of the shared ``UploadStore``, like tus and Firebase's resumable protocol (same
/// durability, leases, expiry, ownership and gc), and end through the same
/// ``FirebaseUploads/complete(_:identity:completion:progress:)``. Choices:
/// - A chunk that does not start at the committed offset appends nothing: the answer is 308 with
///   the range really stored, from which the client resumes (it is refused before its body).
/// - A chunk whose connection breaks is dropped whole (the client asks the status and resends).
/// - The preconditions are checked at the start (to fail early) and again inside the publish.
/// - A chunk may come with `POST` as well as `PUT`, as Google takes it (Go's client sends POST,
///   and `X-GUploader-No-308: yes`: see ``no308(_:_:)``).
/// - A chunk's body may be chunked (`Transfer-Encoding`), streamed like any other: Node's client
///   sends its whole upload as one `PUT` with `Content-Range: bytes 0-*/*`. `bytes a-*/*` is the
///   rest of the object (complete when the body ends, as GCS does); `bytes a-*/N` completes at N
///   (a body ending short of it is a chunk: 308); `bytes a-b/…` must carry exactly its span.
struct GcsUploads {
  let context: ServiceContext
  var store: UploadStore { context.uploads }

  func register(in router: inout Router) {
    let collection = "/upload/storage/v1/b/{bucket}/o"
    for (method, query) in [("PUT", [:]), ("POST", ["upload_id": Router.anyValue])] {
      GcsAPI.add(&router, method, collection, query: query, route: "gcs.upload.chunk", decorate: Self.no308) {
        request, params in
        let bucket = try context.bucket(params)
        let identity = try context.identity(request)
        return HTTPHeadDecision(try chunk(request, bucket: bucket, identity: identity))
      }
    }
    GcsAPI.add(&router, "POST", collection, route: "gcs.upload") { request, params in
      let bucket = try context.bucket(params)
      let identity = try context.identity(request)
      return HTTPHeadDecision(try start(request, bucket: bucket, identity: identity))
    }
    GcsAPI.add(&router, "DELETE", collection, route: "gcs.upload.cancel") { request, params in
      let bucket = try context.bucket(params)
      let identity = try context.identity(request)
      let upload = try session(request, bucket: bucket, identity: identity)
      try store.terminate(id: upload.id, owner: identity?.uid)
      // GCS answers a cancelled session with 499 (Client Closed Request).
      return .respond(HTTPResponse(status: 499))
    }
  }

  /// What ends a GCS write: the policy's admission with the request's preconditions, and the
  /// GCS object resource as the answer (with its MD5 and CRC32C, computed now if need be).
  func completion(_ request: HTTPRequest, conditions: GcsPreconditions, identity: Identity?)
    -> WriteCompletion
  {
    let endpoint = GcsEndpoint(context: context)
    return WriteCompletion(
      admission: GcsAdmission(base: context.admission(for: identity), conditions: conditions),
      answer: { try endpoint.resource($0, request: request) }, check: { try conditions.check($0) })
  }

  func start(_ request: HTTPRequest, bucket: String, identity: Identity?) throws -> HTTPHeadDecision.Action {
    let conditions = try GcsPreconditions(request)
    let done = completion(request, conditions: conditions, identity: identity)
    switch request.queryValue("uploadType") {
    case "media":
      guard request.queryValue("name") != nil else {
        throw LarderError.invalidArgument("uploadType=media needs the object's name: ?name=NAME")
      }
      // The preconditions are checked on the row the early question judges, before the body.
      return .receiveBody(
        try ObjectsEndpoint(context: context).upload(
          request, bucket: bucket, identity: identity, completion: done))
    case "multipart":
      return try FirebaseUploads(context: context).multipart(
        request, bucket: bucket, identity: identity, completion: done)
    case "resumable":
      return try startSession(request, bucket: bucket, identity: identity, conditions: conditions)
    case let other?:
      throw LarderError.invalidArgument(
        "uploadType '\(other.prefix(40))' is not supported; Larder takes media, multipart and resumable")
    case nil:
      throw LarderError.invalidArgument("uploadType is required: media, multipart or resumable")
    }
  }

  // MARK: - resumable

  func startSession(_ request: HTTPRequest, bucket: String, identity: Identity?, conditions: GcsPreconditions)
    throws
    -> HTTPHeadDecision.Action
  {
    let queryName = request.queryValue("name")
    if let queryName { try ObjectName.validateName(queryName) }
    let length = try FirebaseUploads(context: context).declaredLength(
      request, header: "X-Upload-Content-Length")
    let headerType = request.headers["X-Upload-Content-Type"]
    let base = try FirebaseUploads(context: context).uploadBase(request)
    return .receiveBody(
      BufferedBodySink(limit: 64 * 1024) { body in
        let resource = try FirebaseUploadMetadata.parse(body)
        let path = try ObjectPath(
          bucket: bucket, name: try resource.objectName(query: queryName, bucket: bucket))
        let options = resource.writeOptions(declaredFallback: headerType)
        try options.validate()
        _ = try resource.expectedMD5()
        _ = try resource.expectedCRC32C()
        // The session's early question (with its preconditions, on the same row); the last byte's
        // is asked inside the write that publishes it.
        _ = try ObjectService(context: context).judgeWrite(
          .declared(bucket: bucket, name: path.name, size: length, options: options), at: path, identity: identity,
          check: { try conditions.check($0) })
        var metadata = try resource.uploadMetadata(name: path.name, declaredType: options.declaredContentType)
        if !conditions.isEmpty { metadata[GcsPreconditions.uploadMetadataKey] = try conditions.stored() }
        let upload = try context.creatingUpload(request, identity: identity) {
          try store.create(bucket: bucket, name: path.name, owner: identity?.uid, length: length, metadata: metadata)
        }
        var r = HTTPResponse(status: 200)
        r.headers.set(
          "Location",
          "\(base)/upload/storage/v1/b/\(PercentEncoding.encodeComponent(bucket))/o?uploadType=resumable"
            + "&name=\(PercentEncoding.encodeComponent(path.name))&upload_id=\(upload.id)")
        r.headers.set("X-GUploader-UploadID", upload.id)
        return r
      })
  }

  /// The session a request's `upload_id` names, if the caller owns it.
  func session(_ request: HTTPRequest, bucket: String, identity: Identity?) throws -> Upload {
    guard let id = request.queryValue("upload_id") else {
      throw LarderError.invalidArgument(
        "upload_id is required: use the session URI the upload's start answered")
    }
    let upload = try store.upload(id: id, owner: identity?.uid)
    guard upload.bucket.hasSameBytes(as: bucket), upload.concat == nil, upload.name != nil else {
      throw UploadError.notFound(id: id)
    }
    return upload
  }

  /// `Content-Range` of a session request.
  enum ChunkRange: Equatable {
    /// `bytes a-b/N` or `bytes a-b/*`.
    case bytes(first: Int64, last: Int64, total: Int64?)
    /// `bytes a-*/N` or `bytes a-*/*`: from `a` to the end of the body, of a length not known
    /// before it ends (Node's client), up to N or, without N, to the end of the object.
    case open(first: Int64, total: Int64?)
    /// `bytes */N` or `bytes */*`: a status query, or (at N) the finish.
    case status(total: Int64?)

    /// - Throws: ``LarderError/invalidArgument(_:)`` for anything else.
    /// `bodyLength` is nil for a chunked body.
    static func parse(_ header: String?, bodyLength: Int64?) throws -> ChunkRange {
      guard let header else {
        // The whole content in one request.
        guard let bodyLength else { return .open(first: 0, total: nil) }
        return bodyLength == 0 ? .status(total: 0) : .bytes(first: 0, last: bodyLength - 1, total: bodyLength)
      }
      let text = header.trimmingCharacters(in: .whitespaces)
      guard text.lowercased().hasPrefix("bytes "), let slash = text.firstIndex(of: "/") else {
        throw LarderError.invalidArgument(
          "Content-Range must be 'bytes a-b/N', 'bytes a-b/*', 'bytes a-*/N', 'bytes a-*/*' or 'bytes */N'")
      }
      let span = text[text.index(text.startIndex, offsetBy: 6)..<slash].trimmingCharacters(in: .whitespaces)
      let totalText = String(text[text.index(after: slash)...])
      var total: Int64?
      if totalText != "*" {
        guard let n = DecimalCount.parse(header: totalText) else {
          throw LarderError.invalidArgument("Content-Range's total must be a count or '*'")
        }
        total = n
      }
      if span == "*" { return .status(total: total) }
      let ends = span.split(separator: "-", omittingEmptySubsequences: false)
      if ends.count == 2, ends[1] == "*", let first = DecimalCount.parse(header: String(ends[0])) {
        if let total, first > total {
          throw LarderError.invalidArgument("Content-Range starts at \(first), beyond its total \(total)")
        }
        return .open(first: first, total: total)
      }
      guard ends.count == 2, let first = DecimalCount.parse(header: String(ends[0])),
        let last = DecimalCount.parse(header: String(ends[1])), first <= last
      else { throw LarderError.invalidArgument("Content-Range's span must be 'a-b' with a <= b") }
      if let total, last >= total {
        throw LarderError.invalidArgument("Content-Range ends at \(last), beyond its total \(total)")
      }
      return .bytes(first: first, last: last, total: total)
    }
  }

  /// Go's client sends `X-GUploader-No-308: yes` (its HTTP client takes a 308 for a redirect)
  /// and reads 200 with `X-Http-Status-Code-Override: 308` as Resume Incomplete, as Google
  /// answers it; a bare 308 fails its upload.
  @Sendable static func no308(_ response: inout HTTPResponse, _ request: HTTPRequest) {
    guard response.status == 308,
      request.headers["X-GUploader-No-308"]?.trimmingCharacters(in: .whitespaces).lowercased() == "yes"
    else { return }
    response.status = 200
    response.headers.set("X-Http-Status-Code-Override", "308")
  }

  /// 308 Resume Incomplete: `Range: bytes=0-X` of what is stored (none when nothing is).
  static func resumeIncomplete(_ offset: Int64) -> HTTPResponse {
    var r = HTTPResponse(status: 308)
    if offset > 0 { r.headers.set("Range", "bytes=0-\(offset - 1)") }
    return r
  }

  func chunk(_ request: HTTPRequest, bucket: String, identity: Identity?) throws -> HTTPHeadDecision.Action {
    let upload = try session(request, bucket: bucket, identity: identity)
    // nil: a chunked body, of a length known when it ends.
    let bodyLength = request.contentLength ?? (request.headers["Transfer-Encoding"] == nil ? 0 : nil)
    let range = try ChunkRange.parse(request.headers["Content-Range"], bodyLength: bodyLength)
    if upload.completedAt != nil {
      // The last chunk's answer was lost: the object it made, if it is still that upload's.
      guard let object = try context.larder.objects.find(bucket: upload.bucket, name: upload.name ?? "") else {
        throw UploadError.notFound(id: upload.id)
      }
      return .respond(try GcsEndpoint(context: context).resource(object, request: request))
    }
    let first: Int64
    let total: Int64?
    // The span a chunked body must fill exactly (a `Content-Length` body is checked up front).
    let span: Int64?
    // `bytes a-*/…`: the body's end is the object's, when no total says otherwise.
    let endsUpload: Bool
    switch range {
    case .status(let t):
      guard let t, t == upload.offset, upload.length.map({ $0 == t }) ?? true else {
        if let t, let length = upload.length, t != length {
          throw LarderError.invalidArgument("the session is for \(length) bytes, not \(t)")
        }
        return .respond(Self.resumeIncomplete(upload.offset))
      }
      guard bodyLength == 0 else { throw LarderError.invalidArgument("a 'bytes */N' request takes no body") }
      (first, total, span, endsUpload) = (t, t, nil, false)
    case .bytes(let f, let last, let t):
      if let bodyLength, bodyLength != last - f + 1 {
        throw LarderError.invalidArgument(
          "Content-Range names \(last - f + 1) bytes, the body has \(bodyLength)")
      }
      if let t, let length = upload.length, t != length {
        throw LarderError.invalidArgument("the session is for \(length) bytes, not \(t)")
      }
      // Not where the stored bytes end: nothing is appended, the client resumes from the answer.
      guard f == upload.offset else { return .respond(Self.resumeIncomplete(upload.offset)) }
      (first, total, span, endsUpload) = (f, t, bodyLength == nil ? last - f + 1 : nil, false)
    case .open(let f, let t):
      if let t, let length = upload.length, t != length {
        throw LarderError.invalidArgument("the session is for \(length) bytes, not \(t)")
      }
      guard f == upload.offset else { return .respond(Self.resumeIncomplete(upload.offset)) }
      (first, total, span, endsUpload) = (f, t, nil, true)
    }
    // A chunked body meets the limit as it streams (the append's size limit: 413, nothing kept).
    if first + (bodyLength ?? 0) > context.maxUploadSize {
      throw LarderError.sizeLimitExceeded(limit: context.maxUploadSize)
    }
    let append: UploadAppend
    do {
      append = try store.beginAppend(
        upload, owner: identity?.uid, offset: first, length: upload.length == nil ? total : nil,
        sizeLimit: context.maxUploadSize, checkpoints: false, md5: true)
    } catch UploadError.locked {
      throw HTTPResponseError(APIError.retryLater("the upload session is busy with another request; retry"))
    } catch UploadError.offsetMismatch(let expected, _) {
      return .respond(Self.resumeIncomplete(expected))
    }
    let done = completion(
      request, conditions: GcsPreconditions.fromUpload(upload.metadata), identity: identity)
    let firebase = FirebaseUploads(context: context)
    return .receiveBody(
      try context.charged(
        UploadAppendSink(append, keepReceivedOnBreak: false) { append in
          if let span, append.received != span {
            append.abort(keepReceived: false)
            throw LarderError.invalidArgument(
              "Content-Range names \(span) bytes, the body had \(append.received)")
          }
          if endsUpload { append.endUploadHere() }
          return try firebase.complete(
            append, identity: identity, completion: done, progress: { Self.resumeIncomplete($0.offset) })
        }, request, identity: identity))
  }
}
