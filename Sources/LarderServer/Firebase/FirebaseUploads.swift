import Foundation
import Larder
import LarderHTTP

/// Firebase Storage's upload protocols on `POST /v0/b/{bucket}/o`, as the Firebase SDKs speak them.
///
/// ```
/// X-Goog-Upload-Protocol: multipart     multipart/related body (JSON part, content part) → 200 metadata
/// X-Goog-Upload-Protocol: resumable
///   X-Goog-Upload-Command: start        JSON body → 200, X-Goog-Upload-Status: active, X-Goog-Upload-URL
/// POST <X-Goog-Upload-URL>  (…/o?name=N&upload_id=ID&upload_protocol=resumable)
///   X-Goog-Upload-Command: upload            + X-Goog-Upload-Offset, raw chunk → 200 active
///   X-Goog-Upload-Command: upload, finalize  the last chunk                   → 200 final + metadata
///   X-Goog-Upload-Command: finalize          no body (a deferred length)      → 200 final + metadata
///   X-Goog-Upload-Command: query             → 200, active|final, X-Goog-Upload-Size-Received
///   X-Goog-Upload-Command: cancel            → 200, the session and its bytes are deleted
/// ```
/// Anything else that names these headers (another protocol, an unknown command, an upload id
/// without a command) is a 400 that changes nothing: a request Larder does not understand must
/// never be stored as an object's bytes.
///
/// Resumable sessions are uploads of the shared ``UploadStore`` (the tus endpoint's): the same
/// durability (every acknowledged chunk fsync'ed and its offset committed before the 200), the
/// same per-upload lease, expiry and collection, and the same owner binding: a session belongs to
/// the uid that started it, since the SDK fetches a fresh token for each request. Choices:
/// - A chunk must start at the committed offset; any other is refused (409) before a byte is read.
/// - A chunk whose connection breaks is dropped whole: the SDK resends the same chunk at the same
///   offset, so keeping part of it would make the resend a mismatch.
/// - `upload` must not reach the declared length (the last chunk says `upload, finalize`), and
///   `upload, finalize` must end exactly there: the SDK counts a 200 chunk as wholly kept.
/// - The rules are asked at `start` (declared size, type, metadata) and on the real bytes when the
///   last one arrives, before the object becomes visible; a denial then deletes the session (403).
struct FirebaseUploads {
  let context: ServiceContext
  var store: UploadStore { context.uploads }

  /// Whether a `POST …/o` is one of these protocols (or claims to be): any `X-Goog-Upload-*`
  /// protocol or command header, or the `upload_id` of a resumable session's URL.
  static func applies(to request: HTTPRequest) -> Bool {
    request.headers["X-Goog-Upload-Protocol"] != nil || request.headers["X-Goog-Upload-Command"] != nil
      || request.queryValue("upload_id") != nil || request.queryValue("upload_protocol") != nil
  }

  /// The commands a resumable session takes.
  enum Command: Equatable {
    case start, upload, uploadFinalize, finalize, query, cancel

    /// Parses `X-Goog-Upload-Command` (comma-separated, case-insensitive).
    init?(_ header: String) {
      let words = header.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
      switch words {
      case ["start"]: self = .start
      case ["upload"]: self = .upload
      case ["upload", "finalize"]: self = .uploadFinalize
      case ["finalize"]: self = .finalize
      case ["query"]: self = .query
      case ["cancel"]: self = .cancel
      default: return nil
      }
    }
  }

  /// What a multipart body may add to its content: the JSON part (64 KiB), two part headers
  /// and three delimiters. The size limit is on the content, not on the wrapper.
  static let maxWrapperBytes: Int64 = 64 * 1024 + 2 * Int64(MultipartRelatedParser.headerLimit) + 256

  static func badRequest(_ message: String) -> LarderError { .invalidArgument(message) }

  func handle(_ request: HTTPRequest, bucket: String, identity: Identity?) throws -> HTTPHeadDecision.Action {
    let proto = request.headers["X-Goog-Upload-Protocol"]?.trimmingCharacters(in: .whitespaces).lowercased()
    let commandHeader = request.headers["X-Goog-Upload-Command"]
    let id = request.queryValue("upload_id")
    if let p = request.queryValue("upload_protocol"), p != "resumable" {
      throw Self.badRequest("upload_protocol '\(p.prefix(40))' is not supported")
    }
    if request.queryValue("uploadType") != nil {
      throw Self.badRequest("uploadType and X-Goog-Upload-Protocol exclude each other")
    }
    switch proto {
    case "multipart":
      guard commandHeader == nil, id == nil else {
        throw Self.badRequest("a multipart upload takes no X-Goog-Upload-Command and no upload_id")
      }
      return try multipart(request, bucket: bucket, identity: identity)
    case "resumable", nil:
      guard let commandHeader else {
        throw Self.badRequest("X-Goog-Upload-Command is required (start, upload, finalize, query or cancel)")
      }
      guard let command = Command(commandHeader) else {
        throw Self.badRequest(
          "X-Goog-Upload-Command '\(commandHeader.prefix(60))' is not supported; "
            + "Larder takes start, upload, 'upload, finalize', finalize, query and cancel")
      }
      if command == .start {
        guard id == nil else { throw Self.badRequest("start takes no upload_id: it creates the session") }
        return try start(request, bucket: bucket, identity: identity)
      }
      guard let id else { throw Self.badRequest("\(commandHeader.prefix(40)) needs the session's upload_id") }
      return try session(request, command: command, id: id, bucket: bucket, identity: identity)
    case let other?:
      throw Self.badRequest(
        "X-Goog-Upload-Protocol '\(other.prefix(40))' is not supported; Larder takes multipart and resumable")
    }
  }

  // MARK: - multipart

  func multipart(
    _ request: HTTPRequest, bucket: String, identity: Identity?, completion: WriteCompletion? = nil
  ) throws -> HTTPHeadDecision.Action {
    let name = request.queryValue("name")
    if let name { try ObjectName.validateName(name) }
    let boundary: String
    do {
      boundary = try MultipartRelatedParser.boundary(fromContentType: request.headers["Content-Type"])
    } catch let error as MultipartError {
      throw Self.badRequest(error.message)
    }
    if request.contentLength == nil && request.headers["Transfer-Encoding"] == nil {
      throw RequestError.lengthRequired
    }
    if let length = request.contentLength, length > context.maxUploadSize + Self.maxWrapperBytes {
      throw LarderError.sizeLimitExceeded(limit: context.maxUploadSize)
    }
    return .receiveBody(
      try context.charged(
        FirebaseMultipartSink(
          context: context, bucket: bucket, name: name, identity: identity,
          ifGenerationMatch: try DecimalCount.query(request, "ifGenerationMatch"), boundary: boundary,
          requestLength: request.contentLength, completion: completion), request, identity: identity))
  }

  // MARK: - resumable: start

  func start(_ request: HTTPRequest, bucket: String, identity: Identity?) throws -> HTTPHeadDecision.Action {
    let queryName = request.queryValue("name")
    if let queryName { try ObjectName.validateName(queryName) }
    let length = try declaredLength(request, header: "X-Goog-Upload-Header-Content-Length")
    let headerType = request.headers["X-Goog-Upload-Header-Content-Type"]
    // Checked before anything is created: the session's URL must be one the client can use.
    let base = try uploadBase(request)
    return .receiveBody(
      BufferedBodySink(limit: 64 * 1024) { body in
        let resource = try FirebaseUploadMetadata.parse(body)
        let path = try ObjectPath(bucket: bucket, name: try resource.objectName(query: queryName, bucket: bucket))
        let name = path.name
        let options = resource.writeOptions(declaredFallback: headerType)
        try options.validate()
        _ = try resource.expectedMD5()
        _ = try resource.expectedCRC32C()
        // The session's early question; the last byte's is asked inside the write that publishes it.
        _ = try ObjectService(context: context).judgeWrite(
          .declared(bucket: bucket, name: name, size: length, options: options), at: path, identity: identity)
        let metadata = try resource.uploadMetadata(name: name, declaredType: options.declaredContentType)
        let upload = try context.creatingUpload(request, identity: identity) {
          try store.create(bucket: bucket, name: name, owner: identity?.uid, length: length, metadata: metadata)
        }
        var r = HTTPResponse(status: 200)
        r.headers.set("X-Goog-Upload-Status", "active")
        r.headers.set("X-Goog-Upload-URL", Self.sessionURL(base: base, upload: upload))
        r.headers.set("X-GUploader-UploadID", upload.id)
        r.headers.set("X-Goog-Upload-Chunk-Granularity", "262144")
        return r
      })
  }

  /// The upload's length a start request declares in `header`, if it does (within the limit).
  func declaredLength(_ request: HTTPRequest, header: String) throws -> Int64? {
    guard let text = request.headers[header] else { return nil }
    guard let n = DecimalCount.parse(header: text) else { throw Self.badRequest("\(header) must be a non-negative integer") }
    guard n <= context.maxUploadSize else { throw LarderError.sizeLimitExceeded(limit: context.maxUploadSize) }
    return n
  }

  /// `--public-url`, else `http://` + the request's `Host`, which must be a plain host[:port].
  func uploadBase(_ request: HTTPRequest) throws -> String {
    if var base = context.publicURL, !base.isEmpty {
      while base.hasSuffix("/") { base.removeLast() }
      return base
    }
    guard let host = request.headers["Host"], Self.isPlainHost(host) else {
      throw Self.badRequest(
        "a resumable upload needs a valid Host header to build its absolute upload URL (or start the server with --public-url)")
    }
    return "http://\(host)"
  }

  /// `name`, `name:port`, `1.2.3.4:port`, `[::1]:port`: letters, digits, `.-:[]`, at most 255 bytes.
  static func isPlainHost(_ host: String) -> Bool {
    !host.isEmpty && host.utf8.count <= 255
      && host.utf8.allSatisfy {
        ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A)
          || $0 == 0x2E || $0 == 0x2D || $0 == 0x3A || $0 == 0x5B || $0 == 0x5D
      }
  }

  static func sessionURL(base: String, upload: Upload) -> String {
    let name = PercentEncoding.encodeComponent(upload.name ?? "")
    return "\(base)/v0/b/\(PercentEncoding.encodeComponent(upload.bucket))/o?name=\(name)"
      + "&upload_id=\(upload.id)&upload_protocol=resumable"
  }

  // MARK: - resumable: the session's URL

  func session(_ request: HTTPRequest, command: Command, id: String, bucket: String, identity: Identity?) throws
    -> HTTPHeadDecision.Action
  {
    let upload = try store.upload(id: id, owner: identity?.uid)
    guard upload.bucket.hasSameBytes(as: bucket), upload.concat == nil, let name = upload.name else {
      throw UploadError.notFound(id: id)
    }
    if let queryName = request.queryValue("name"), !queryName.hasSameBytes(as: name) {
      throw Self.badRequest("this upload session is for another object name")
    }
    switch command {
    case .start: throw Self.badRequest("start takes no upload_id")
    case .query:
      return .respond(Self.status(upload.completedAt == nil ? "active" : "final", received: upload.offset))
    case .cancel:
      try store.terminate(id: id, owner: identity?.uid)
      return .respond(Self.status("cancelled", received: nil))
    case .upload, .uploadFinalize, .finalize:
      return try append(request, command: command, upload: upload, identity: identity)
    }
  }

  func append(_ request: HTTPRequest, command: Command, upload: Upload, identity: Identity?) throws
    -> HTTPHeadDecision.Action
  {
    guard let offset = request.headers["X-Goog-Upload-Offset"].flatMap({ DecimalCount.parse(header: $0) }) else {
      throw Self.badRequest("X-Goog-Upload-Offset must be a non-negative integer")
    }
    let bodyLength = try Self.chunkLength(request)
    if upload.completedAt != nil {
      // A finalize whose answer was lost, resent: it is done.
      guard command != .upload, offset + bodyLength == upload.length ?? upload.offset else {
        throw UploadError.offsetMismatch(expected: upload.offset, actual: offset)
      }
      guard let object = try context.larder.objects.find(bucket: upload.bucket, name: upload.name ?? "") else {
        throw UploadError.notFound(id: upload.id)
      }
      var r = ObjectsEndpoint(context: context).writeResponse(object, identity: identity, withMD5: true)
      r.headers.set("X-Goog-Upload-Status", "final")
      return .respond(r)
    }
    guard offset == upload.offset else { throw UploadError.offsetMismatch(expected: upload.offset, actual: offset) }
    let end = offset + bodyLength
    if end > context.maxUploadSize { throw LarderError.sizeLimitExceeded(limit: context.maxUploadSize) }
    var declare: Int64?
    switch (command, upload.length) {
    case (.upload, let length?):
      if end > length { throw UploadError.exceedsLength(length: length) }
      if end == length { throw Self.badRequest("the last chunk must say 'upload, finalize'") }
    case (.upload, nil):
      break
    case (.uploadFinalize, let length?), (.finalize, let length?):
      if end > length { throw UploadError.exceedsLength(length: length) }
      if end < length {
        throw Self.badRequest("finalize at \(end) bytes, but the session was started for \(length)")
      }
    case (.uploadFinalize, nil), (.finalize, nil):
      declare = end
    default:
      throw Self.badRequest("not a chunk command")
    }
    if command == .finalize && bodyLength != 0 {
      throw Self.badRequest("finalize takes no bytes; send them with 'upload, finalize'")
    }
    let append: UploadAppend
    do {
      append = try store.beginAppend(
        upload, owner: identity?.uid, offset: offset, length: declare, sizeLimit: context.maxUploadSize,
        // The SDK resends a broken chunk whole: nothing of it is kept, so nothing is checkpointed.
        // Its answer reports `md5Hash`: hashed as the bytes arrive.
        checkpoints: false, md5: true)
    } catch UploadError.locked {
      // Another request holds the session: a chunk still running, or one on a node that died,
      // whose lease runs out (`--upload-lease`). The SDKs retry a 503 with backoff; a 423 would
      // fail the upload for good.
      throw HTTPResponseError(APIError.retryLater("the upload session is busy with another request; retry"))
    }
    // The SDK resends a broken chunk whole at the same offset: keep none of it.
    return .receiveBody(
      try context.charged(
        UploadAppendSink(append, keepReceivedOnBreak: false) { try self.complete($0, identity: identity) }, request,
        identity: identity))
  }

  /// Ends a chunk: an acknowledged offset, or the last byte: rules, then publish. `completion`
  /// and `progress` are another protocol's (GCS's) admission and answers for the same steps.
  func complete(
    _ append: UploadAppend, identity: Identity?, completion: WriteCompletion? = nil,
    progress: ((Upload) -> HTTPResponse)? = nil
  ) throws -> HTTPResponse {
    switch try append.finish() {
    case .progress(let upload):
      return progress?(upload) ?? Self.status("active", received: upload.offset)
    case .complete(let completed):
      let resource = FirebaseUploadMetadata.fromUpload(completed.upload.metadata)
      let options = resource.writeOptions(declaredFallback: completed.upload.metadata["contentType"])
      // The only case a resumable upload's MD5 is computed before the commit: one was given.
      if let md5 = try resource.expectedMD5() {
        // A read failure rolls back to the last acknowledged offset (`completed` is dropped).
        let actual = try completed.staged.computeMD5()
        if md5 != actual {
          // The content is final and is not what its md5Hash says: the session ends with it.
          store.reject(completed)
          throw LarderError.checksumMismatch(
            algorithm: "md5", expected: Data(md5).base64EncodedString(), actual: Data(actual).base64EncodedString())
        }
      }
      do {
        try resource.checkCRC32C(completed.staged)
      } catch let error as LarderError {
        if case .checksumMismatch = error { store.reject(completed) }
        throw error
      }
      // The rules judge the real content inside the write (the admission step); a denial ends the
      // session with it, any other failure rolls back to the last acknowledged offset (resend).
      let object = try store.publish(
        completed, options: options, admission: completion?.admission ?? context.admission(for: identity))
      if let completion { return try completion.answer(object) }
      var r = ObjectsEndpoint(context: context).writeResponse(object, identity: identity, withMD5: true)
      r.headers.set("X-Goog-Upload-Status", "final")
      return r
    }
  }

  /// A chunk's length: its `Content-Length`, 0 without a body; a chunked body is refused (411).
  static func chunkLength(_ request: HTTPRequest) throws -> Int64 {
    if let length = request.contentLength { return length }
    guard request.headers["Transfer-Encoding"] == nil else { throw RequestError.lengthRequired }
    return 0
  }

  static func status(_ status: String, received: Int64?) -> HTTPResponse {
    var r = HTTPResponse(status: 200)
    r.headers.set("X-Goog-Upload-Status", status)
    if let received { r.headers.set("X-Goog-Upload-Size-Received", String(received)) }
    return r
  }

}
