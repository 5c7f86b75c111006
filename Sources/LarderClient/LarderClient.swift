import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A client for one bucket of a Larder server, over `URLSession`; depends on Foundation only.
///
/// ```swift
/// let client = LarderClient(baseURL: URL(string: "http://127.0.0.1:8080")!, bucket: "app", token: { jwt })
/// let meta = try await client.upload(png, name: "users/u1/a.png", contentType: "image/png")
/// let bytes = try await client.download(name: "users/u1/a.png", maxSize: 5 << 20)
/// ```
/// Every call throws `LarderClientError`; the server's JSON errors arrive decoded.
/// The client owns one `URLSession`; call ``invalidate()`` when done (deinit also does).
public final class LarderClient: Sendable {
  /// Supplies a bearer token (a JWT) for each request; `nil` sends none.
  public typealias TokenProvider = @Sendable () async throws -> String?

  public let baseURL: URL
  public let bucket: String
  public let retryPolicy: RetryPolicy
  let token: TokenProvider?
  let session: URLSession

  /// - Parameters:
  ///   - baseURL: the server's root (`http://host:8080`, or a prefix a proxy serves it under).
  ///   - bucket: every call works in this bucket.
  ///   - token: asked before each request; its value goes out as `Authorization: Bearer`.
  ///   - timeout: per request, seconds without progress before it fails.
  public init(
    baseURL: URL, bucket: String, token: TokenProvider? = nil, retryPolicy: RetryPolicy = .default,
    timeout: TimeInterval = 60
  ) {
    self.baseURL = baseURL
    self.bucket = bucket
    self.token = token
    self.retryPolicy = retryPolicy
    let configuration = URLSessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = timeout
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.urlCache = nil
    configuration.httpCookieStorage = nil
    session = URLSession(configuration: configuration)
  }

  deinit { session.invalidateAndCancel() }

  /// Cancels what is in flight and releases the session; the client is unusable afterwards.
  public func invalidate() { session.invalidateAndCancel() }

  // MARK: - objects

  /// Uploads `data` as `name` in one request (`POST /v0/b/{bucket}/o?name=`).
  ///
  /// `metadata` travels as `X-Goog-Meta-<key>` headers, so the server stores keys lower-cased;
  /// keys must be header tokens and values printable ASCII.
  /// - Throws: `.server` (403 by the rules, 413 over the upload limit, …), `.invalidArgument`.
  @discardableResult
  public func upload(
    _ data: Data, name: String, contentType: String? = nil, metadata: [String: String] = [:]
  ) async throws(LarderClientError) -> ObjectMetadata {
    var request = try makeRequest("POST", objectsPath, query: [("name", name)])
    // URLSession on Linux would otherwise declare a form body.
    request.setValue(contentType ?? "application/octet-stream", forHTTPHeaderField: "Content-Type")
    for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
      guard Self.isToken(key), Self.isHeaderValue(value) else {
        throw .invalidArgument("metadata \(key.debugDescription) cannot travel as an HTTP header")
      }
      request.setValue(value, forHTTPHeaderField: "X-Goog-Meta-\(key)")
    }
    request.httpBody = data
    let (body, _) = try await send(request, expecting: [200])
    return try decode(ObjectMetadata.self, body)
  }

  /// The object's metadata (`GET /v0/b/{bucket}/o/{name}`).
  /// - Throws: `.server` with code 404 / `NOT_FOUND` when there is no such object.
  public func metadata(name: String) async throws(LarderClientError) -> ObjectMetadata {
    let request = try makeRequest("GET", objectPath(name))
    let (body, _) = try await send(request, expecting: [200])
    return try decode(ObjectMetadata.self, body)
  }

  /// Downloads the object's bytes, or the `range` of them (`0..<100` is the first 100 bytes).
  ///
  /// With `maxSize`, the server refuses an object (or range) larger than that before sending
  /// a byte of it, so a hostile upload cannot make the caller read gigabytes.
  /// - Throws: `.tooLarge(size:maxSize:)` over `maxSize`; `.server` (404, 416, …).
  public func download(name: String, maxSize: Int64? = nil, range: Range<Int64>? = nil) async throws(LarderClientError)
    -> Data
  {
    var query = [("alt", "media")]
    if let maxSize { query.append(("maxSize", String(maxSize))) }
    var request = try makeRequest("GET", objectPath(name), query: query)
    if let range {
      guard range.lowerBound >= 0, !range.isEmpty else {
        throw .invalidArgument("the range \(range) is empty or negative")
      }
      request.setValue("bytes=\(range.lowerBound)-\(range.upperBound - 1)", forHTTPHeaderField: "Range")
    }
    let (body, _) = try await send(request, expecting: range == nil ? [200] : [206, 200])
    return body
  }

  /// Deletes the object (`DELETE`, 204).
  /// - Throws: `.server` with code 404 when there is no such object.
  public func delete(name: String) async throws(LarderClientError) {
    let request = try makeRequest("DELETE", objectPath(name))
    _ = try await send(request, expecting: [204, 200])
  }

  /// One page of the listing under `prefix` (in name order).
  public func listPage(
    prefix: String = "", delimiter: String? = nil, maxResults: Int? = nil, pageToken: String? = nil
  ) async throws(LarderClientError) -> ObjectListPage {
    let query = Self.listQuery(prefix: prefix, delimiter: delimiter, maxResults: maxResults, pageToken: pageToken)
    let request = try makeRequest("GET", objectsPath, query: query)
    let (body, _) = try await send(request, expecting: [200])
    return try decode(ObjectListPage.self, body)
  }

  /// A listing's query, the same for the Firebase and the GCS calls.
  static func listQuery(prefix: String, delimiter: String?, maxResults: Int?, pageToken: String?) -> [(String, String)] {
    var query: [(String, String)] = []
    if !prefix.isEmpty { query.append(("prefix", prefix)) }
    if let delimiter { query.append(("delimiter", delimiter)) }
    if let maxResults { query.append(("maxResults", String(maxResults))) }
    if let pageToken { query.append(("pageToken", pageToken)) }
    return query
  }

  /// The whole listing under `prefix`, following `nextPageToken` to the last page.
  /// `maxResults` is the page size asked for, not a limit on the result.
  public func list(prefix: String = "", delimiter: String? = nil, maxResults: Int? = nil) async throws(LarderClientError)
    -> ObjectList
  {
    var result = ObjectList(prefixes: [], items: [])
    var token: String?
    repeat {
      let page = try await listPage(prefix: prefix, delimiter: delimiter, maxResults: maxResults, pageToken: token)
      result.prefixes += page.prefixes
      result.items += page.items
      if let next = page.nextPageToken, next == token {
        throw .invalidResponse("the server returned the same page token twice")
      }
      token = page.nextPageToken.flatMap { $0.isEmpty ? nil : $0 }
    } while token != nil
    return result
  }

  // MARK: - plumbing

  var objectsPath: String { "/v0/b/\(Self.encode(bucket))/o" }
  func objectPath(_ name: String) -> String { "\(objectsPath)/\(Self.encode(name))" }
  var uploadsPath: String { "/v0/b/\(Self.encode(bucket))/uploads" }

  /// A request for `path` under the base URL; `Authorization` is added by ``send(_:expecting:)``.
  func makeRequest(_ method: String, _ path: String, query: [(String, String)] = []) throws(LarderClientError)
    -> URLRequest
  {
    var base = baseURL.absoluteString
    while base.hasSuffix("/") { base.removeLast() }
    var text = base + path
    if !query.isEmpty { text += "?" + query.map { "\(Self.encode($0.0))=\(Self.encode($0.1))" }.joined(separator: "&") }
    guard let url = URL(string: text) else { throw .invalidArgument("cannot make a URL of \(text.prefix(200))") }
    return request(method, url)
  }

  func request(_ method: String, _ url: URL) -> URLRequest {
    var request = URLRequest(url: url)
    request.httpMethod = method
    return request
  }

  /// Sends `request` with the bearer token (unless `authorized` is false: a token endpoint's
  /// own call); a status outside `expecting` becomes a typed error.
  func send(_ request: URLRequest, expecting: Set<Int>, authorized: Bool = true) async throws(LarderClientError)
    -> (Data, HTTPURLResponse)
  {
    var request = request
    if authorized, let token {
      let value: String?
      do { value = try await token() } catch { throw .authentication(String(describing: error)) }
      if let value { request.setValue("Bearer \(value)", forHTTPHeaderField: "Authorization") }
    }
    let data: Data
    let response: URLResponse
    do {
      (data, response) = try await session.data(for: request)
    } catch {
      throw .transport(String(describing: error))
    }
    guard let http = response as? HTTPURLResponse else { throw .invalidResponse("not an HTTP response") }
    guard expecting.contains(http.statusCode) else {
      let e = LarderAPIError.decode(status: http.statusCode, body: data)
      if http.statusCode == 413, let size = e.size, let maxSize = e.maxSize {
        throw .tooLarge(size: size, maxSize: maxSize)
      }
      throw .server(e)
    }
    return (data, http)
  }

  func decode<T: Decodable>(_ type: T.Type, _ body: Data) throws(LarderClientError) -> T {
    do {
      return try JSONDecoder().decode(type, from: body)
    } catch {
      throw .invalidResponse("cannot decode \(T.self): \(error)")
    }
  }

  /// Percent-encodes everything but RFC 3986's unreserved characters: a name is one path
  /// segment (`users/u1/a.png` → `users%2Fu1%2Fa.png`), as Firebase sends it.
  static func encode(_ text: String) -> String {
    var out = ""
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
        UInt8(ascii: "~"):
        out.unicodeScalars.append(Unicode.Scalar(byte))
      default:
        out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
      }
    }
    return out
  }

  /// An HTTP token (RFC 9110 `tchar`), as a header name suffix must be.
  static func isToken(_ text: String) -> Bool {
    !text.isEmpty
      && text.utf8.allSatisfy { b in
        (0x30...0x39).contains(b) || (0x41...0x5a).contains(b) || (0x61...0x7a).contains(b)
          || "!#$%&'*+-.^_`|~".utf8.contains(b)
      }
  }

  /// Printable ASCII and spaces only: no CR/LF to split a header, nothing a proxy re-encodes.
  static func isHeaderValue(_ text: String) -> Bool {
    text.utf8.allSatisfy { $0 == 0x09 || (0x20...0x7e).contains($0) }
  }
}

extension String {
  fileprivate func leftPadded(to width: Int) -> String {
    count >= width ? self : String(repeating: "0", count: width - count) + self
  }
}
