import Foundation
import Larder
import LarderCrypto
import LarderHTTP

/// An object as the GCS JSON API shapes it (`storage#object`).
///
/// Generations, metagenerations and sizes are strings, times RFC 3339 with milliseconds, digests
/// base64 (`crc32c` of the 4 big-endian bytes). `md5Hash` and `crc32c` are absent only while not
/// known yet (a listing does not hash; single-object answers compute them first).
struct GcsObjectResource: Encodable {
  var kind = "storage#object"
  var id: String
  var selfLink: String
  var mediaLink: String
  var name: String
  var bucket: String
  var generation: String
  var metageneration: String
  var contentType: String
  var size: String
  var md5Hash: String?
  var crc32c: String?
  var etag: String
  var timeCreated: String
  var updated: String
  var timeStorageClassUpdated: String
  var storageClass = "STANDARD"
  var metadata: [String: String]?
  var cacheControl: String?
  var contentDisposition: String?
  var contentEncoding: String?
  var contentLanguage: String?

  init(_ object: StoredObject, base: String) {
    let bucketPath =
      "b/\(PercentEncoding.encodeComponent(object.bucket))/o/\(PercentEncoding.encodeComponent(object.name))"
    id = "\(object.bucket)/\(object.name)/\(object.generation)"
    selfLink = "\(base)/storage/v1/\(bucketPath)"
    mediaLink = "\(base)/download/storage/v1/\(bucketPath)?generation=\(object.generation)&alt=media"
    name = object.name
    bucket = object.bucket
    generation = String(object.generation)
    metageneration = String(object.metageneration)
    contentType = object.contentType
    size = String(object.file.size)
    md5Hash = object.file.md5.isEmpty ? nil : object.file.md5Base64
    crc32c = object.file.crc32c.map { Data(CRC32C.bytes($0)).base64EncodedString() }
    etag = Data("\(object.generation)/\(object.metageneration)".utf8).base64EncodedString()
    timeCreated = StoredObject.timestamp(object.timeCreated)
    updated = StoredObject.timestamp(object.updated)
    timeStorageClassUpdated = timeCreated
    metadata = object.metadata.isEmpty ? nil : object.metadata
    cacheControl = object.cacheControl
    contentDisposition = object.contentDisposition
    contentEncoding = object.contentEncoding
    contentLanguage = object.contentLanguage
  }

  /// This resource as JSON: byte for byte what `JSONEncoder` with `.sortedKeys` and
  /// `.withoutEscapingSlashes` writes of it (its `Encodable` form, which listings still take),
  /// without Codable's containers, for `objects.get` and every event delivery. `timeDeleted`
  /// (an event's for a delete, as Google sends it) goes in its sorted place.
  func write(to json: inout JSONWriter, timeDeleted: String? = nil) {
    json.beginObject()
    json.field("bucket", bucket)
    json.field("cacheControl", cacheControl)
    json.field("contentDisposition", contentDisposition)
    json.field("contentEncoding", contentEncoding)
    json.field("contentLanguage", contentLanguage)
    json.field("contentType", contentType)
    json.field("crc32c", crc32c)
    json.field("etag", etag)
    json.field("generation", generation)
    json.field("id", id)
    json.field("kind", kind)
    json.field("md5Hash", md5Hash)
    json.field("mediaLink", mediaLink)
    if let metadata { json.field("metadata", metadata) }
    json.field("metageneration", metageneration)
    json.field("name", name)
    json.field("selfLink", selfLink)
    json.field("size", size)
    json.field("storageClass", storageClass)
    json.field("timeCreated", timeCreated)
    json.field("timeDeleted", timeDeleted)
    json.field("timeStorageClassUpdated", timeStorageClassUpdated)
    json.field("updated", updated)
    json.endObject()
  }

  /// `x-goog-hash` of a download: what google-cloud-storage checks the bytes against.
  static func hashHeader(_ file: File) -> String? {
    var parts: [String] = []
    if let crc = file.crc32c { parts.append("crc32c=" + Data(CRC32C.bytes(crc)).base64EncodedString()) }
    if !file.md5.isEmpty { parts.append("md5=" + file.md5Base64) }
    return parts.isEmpty ? nil : parts.joined(separator: ",")
  }
}

/// A bucket as the GCS JSON API shapes it (`storage#bucket`). Larder's buckets have no settings
/// of their own: every one is `STANDARD` in location `US`.
struct GcsBucketResource: Encodable {
  var kind = "storage#bucket"
  var id: String
  var name: String
  var selfLink: String
  var projectNumber = "0"
  var metageneration = "1"
  var location = "US"
  var locationType = "multi-region"
  var storageClass = "STANDARD"
  var etag = "CAE="
  var timeCreated = "1970-01-01T00:00:00.000Z"
  var updated = "1970-01-01T00:00:00.000Z"

  init(_ name: String, base: String) {
    id = name
    self.name = name
    selfLink = "\(base)/storage/v1/b/\(PercentEncoding.encodeComponent(name))"
  }
}

/// GCS's partial responses (`fields=name,size`, `fields=items(name,size),nextPageToken`,
/// `fields=items/name`): a tree of the keys to keep, applied to the encoded JSON.
struct GcsFields: Equatable {
  /// Key → what to keep inside it (nil: all of it).
  var keys: [String: GcsFields?]

  /// Parses a `fields` value; nil when it is empty or `*`.
  /// - Throws: ``LarderError/invalidArgument(_:)`` for unbalanced parentheses.
  static func parse(_ text: String) throws(LarderError) -> GcsFields? {
    var scalars = Array(text.unicodeScalars)[...]
    let tree = try parseList(&scalars, nested: false)
    return tree.keys.isEmpty || tree.keys["*"] != nil ? nil : tree
  }

  private static func parseList(_ s: inout ArraySlice<Unicode.Scalar>, nested: Bool) throws(LarderError)
    -> GcsFields
  {
    var out = GcsFields(keys: [:])
    var name = ""
    func add(_ sub: GcsFields?) {
      let key = name.trimmingCharacters(in: .whitespaces)
      name = ""
      guard !key.isEmpty else { return }
      // `a/b` is `a(b)`.
      let path = key.split(separator: "/").map(String.init)
      var node: GcsFields? = sub
      for component in path.dropFirst().reversed() { node = GcsFields(keys: [component: node]) }
      out.merge(path[0], node)
    }
    while let c = s.popFirst() {
      switch c {
      case ",": add(nil)
      case "(":
        let sub = try parseList(&s, nested: true)
        add(sub)
        if s.first == "," { s.removeFirst() }
      case ")":
        guard nested else { throw .invalidArgument("fields has an unbalanced ')'") }
        add(nil)
        return out
      default: name.unicodeScalars.append(c)
      }
    }
    guard !nested else { throw .invalidArgument("fields has an unclosed '('") }
    add(nil)
    return out
  }

  private mutating func merge(_ key: String, _ sub: GcsFields?) {
    if let existing = keys[key] {
      guard let existing, let sub else {
        keys[key] = .some(nil)
        return
      }
      var merged = existing
      for (k, v) in sub.keys { merged.merge(k, v) }
      keys[key] = merged
    } else {
      keys[key] = sub
    }
  }

  /// `json` with only the selected keys (arrays filtered element by element).
  func apply(_ json: Any) -> Any {
    if let array = json as? [Any] { return array.map { apply($0) } }
    guard let object = json as? [String: Any] else { return json }
    var out: [String: Any] = [:]
    for (key, sub) in keys {
      guard let value = object[key] else { continue }
      out[key] = sub.map { $0.apply(value) } ?? value
    }
    return out
  }
}

/// What every GCS answer shares: JSON with `fields` applied, and errors in GCS's shape.
enum GcsAPI {
  /// The path prefixes of the GCS JSON API; requests under them get GCS-shaped errors.
  static let pathPrefixes = ["/storage/v1/", "/upload/storage/v1/", "/download/storage/v1/"]

  static func owns(_ request: HTTPRequest) -> Bool {
    let path = request.path
    if pathPrefixes.contains(where: { path.hasPrefix($0) }) || path == "/storage/v1/b" { return true }
    // The API at the root, but not a signed URL of a bucket named `b`.
    return (path.hasPrefix("/b/") || path == "/b") && request.queryValue("X-Goog-Signature") == nil
  }

  /// Declares a route of this API: its handler sees the query form-decoded, as Google's
  /// clients encode it (`prefix=with+space`: a `+` is a space, a literal plus is `%2B`).
  static func add(
    _ router: inout Router, _ method: String, _ pattern: String, query: [String: String] = [:], route: String,
    options: RouteOptions = [], decorate: Router.Decorator? = nil, _ handler: @escaping Router.Handler
  ) {
    router.add(method, pattern, query: query, route: route, options: options, decorate: decorate) {
      request, params in
      try handler(try formDecoded(request), params)
    }
  }

  /// `request` with `+` in its query read as a space.
  static func formDecoded(_ request: HTTPRequest) throws -> HTTPRequest {
    guard let raw = request.rawQuery, raw.utf8.contains(0x2B) else { return request }
    return try HTTPRequest(
      method: request.method, target: "\(request.path)?\(raw.replacingOccurrences(of: "+", with: "%20"))",
      headers: request.headers, remoteAddress: request.remoteAddress, id: request.id, version: request.version
    )
  }

  /// `value` as JSON, keeping only the `fields` the request selects.
  static func json<T: Encodable>(_ value: T, request: HTTPRequest, status: Int = 200) throws -> HTTPResponse {
    guard let fields = try selectedFields(request) else { return .json(status: status, value) }
    return try json(value, keeping: fields, status: status)
  }

  /// An object resource as JSON: without a `fields` selection, written by its own writer (the
  /// encoder's bytes without Codable: `objects.get` and every write's answer).
  static func json(_ resource: GcsObjectResource, request: HTTPRequest, status: Int = 200) throws -> HTTPResponse {
    guard let fields = try selectedFields(request) else {
      var json = JSONWriter(escapingSlashes: false)
      resource.write(to: &json)
      return .json(status: status, encoded: json.bytes)
    }
    return try json(resource, keeping: fields, status: status)
  }

  private static func selectedFields(_ request: HTTPRequest) throws -> GcsFields? {
    try request.queryValue("fields").flatMap { try GcsFields.parse($0) }
  }

  private static func json<T: Encodable>(_ value: T, keeping fields: GcsFields, status: Int) throws -> HTTPResponse {
    let encoded = try JSONEncoder().encode(value)
    let filtered = fields.apply(try JSONSerialization.jsonObject(with: encoded))
    let data = try JSONSerialization.data(
      withJSONObject: filtered, options: [.sortedKeys, .withoutEscapingSlashes])
    return .json(status: status, encoded: Array(data))
  }

  /// GCS's error `reason` for a status.
  static func reason(_ status: Int) -> String {
    switch status {
    case 400, 411: "invalid"
    case 401: "required"
    case 403: "forbidden"
    case 404: "notFound"
    case 405: "methodNotAllowed"
    case 409: "conflict"
    case 410: "gone"
    case 412: "conditionNotMet"
    case 413: "uploadTooLarge"
    case 416: "requestedRangeNotSatisfiable"
    case 423: "locked"
    case 429: "rateLimitExceeded"
    case 501: "notImplemented"
    case 503: "backendError"
    case 507: "storageQuotaExceeded"
    default: status >= 500 ? "backendError" : "invalid"
    }
  }

  /// An error answer (Firebase's shape, as ``HTTPResponse/error(status:message:extra:)`` makes
  /// it) in GCS's: `{"error": {"code", "message", "errors": [{"domain": "global", "reason",
  /// "message"}]}}`, with Larder's extra fields (`size`, `maxSize`) kept. Headers stay; a body
  /// in another shape (or none) is left as it is.
  static func reshapeError(_ response: HTTPResponse) -> HTTPResponse {
    guard response.status >= 400, case .bytes(let bytes) = response.body,
      let json = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
      var error = json["error"] as? [String: Any], error["errors"] == nil,
      let code = error["code"] as? Int, let message = error["message"] as? String
    else { return response }
    error.removeValue(forKey: "status")
    error["errors"] = [["domain": "global", "reason": reason(code), "message": message]]
    guard let data = try? JSONSerialization.data(withJSONObject: ["error": error], options: [.sortedKeys])
    else {
      return response
    }
    var r = response
    r.body = .bytes(Array(data))
    return r
  }
}
