import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The GCS JSON API (`/storage/v1`, `/upload/storage/v1`), as `gsutil` and the Google clients
/// speak it; what `larder --server URL` uses. These calls name their bucket (the client's
/// `bucket` is the Firebase calls').
///
/// ```swift
/// let client = LarderClient(baseURL: server, bucket: "", token: { try await credentials.token() })
/// let page = try await client.gcsListPage(bucket: "app", prefix: "users/", delimiter: "/")
/// let session = try await client.gcsStartResumableUpload(bucket: "app", name: "big.bin", size: n)
/// let object = try await client.gcsResumeUpload(session: session, fileAt: url)   // resumes by itself
/// ```
extension LarderClient {
  func gcsObjectPath(_ bucket: String, _ name: String) -> String {
    "/storage/v1/b/\(Self.encode(bucket))/o/\(Self.encode(name))"
  }

  /// The buckets the caller may list (`buckets.list`).
  public func gcsBuckets() async throws(LarderClientError) -> [String] {
    struct Listing: Decodable {
      struct Bucket: Decodable { var name: String }
      var items: [Bucket]?
      var nextPageToken: String?
    }
    var names: [String] = []
    var token: String?
    repeat {
      let request = try makeRequest("GET", "/storage/v1/b", query: token.map { [("pageToken", $0)] } ?? [])
      let (body, _) = try await send(request, expecting: [200])
      let page = try decode(Listing.self, body)
      names += (page.items ?? []).map(\.name)
      token = page.nextPageToken.flatMap { $0.isEmpty ? nil : $0 }
    } while token != nil
    return names
  }

  /// One page of `objects.list` under `prefix`, folded at `delimiter` when given.
  public func gcsListPage(
    bucket: String, prefix: String = "", delimiter: String? = nil, maxResults: Int? = nil,
    pageToken: String? = nil
  ) async throws(LarderClientError) -> GcsObjectPage {
    let query = Self.listQuery(
      prefix: prefix, delimiter: delimiter, maxResults: maxResults, pageToken: pageToken)
    let request = try makeRequest("GET", "/storage/v1/b/\(Self.encode(bucket))/o", query: query)
    let (body, _) = try await send(request, expecting: [200])
    return try decode(GcsObjectPage.self, body)
  }

  /// The object resource (`objects.get`), with its MD5 and CRC32C.
  public func gcsObject(bucket: String, name: String) async throws(LarderClientError) -> GcsObject {
    let (body, _) = try await send(try makeRequest("GET", gcsObjectPath(bucket, name)), expecting: [200])
    return try object(body)
  }

  /// The object's bytes, or `range` of them, of generation `generation` when given (a newer
  /// generation is a 412, so a download in several ranges never mixes two contents).
  public func gcsDownload(bucket: String, name: String, range: Range<Int64>? = nil, generation: Int64? = nil)
    async throws(LarderClientError) -> Data
  {
    var query = [("alt", "media")]
    if let generation { query.append(("ifGenerationMatch", String(generation))) }
    var request = try makeRequest("GET", gcsObjectPath(bucket, name), query: query)
    if let range {
      guard range.lowerBound >= 0, !range.isEmpty else {
        throw .invalidArgument("the range \(range) is empty or negative")
      }
      request.setValue("bytes=\(range.lowerBound)-\(range.upperBound - 1)", forHTTPHeaderField: "Range")
    }
    let (body, _) = try await send(request, expecting: range == nil ? [200] : [206])
    return body
  }

  /// Deletes the object (`objects.delete`, 204).
  public func gcsDelete(bucket: String, name: String) async throws(LarderClientError) {
    _ = try await send(try makeRequest("DELETE", gcsObjectPath(bucket, name)), expecting: [204, 200])
  }

  /// Copies an object on the server (`objects.copy`; no bytes travel).
  public func gcsCopy(
    from source: (bucket: String, name: String), to destination: (bucket: String, name: String)
  )
    async throws(LarderClientError) -> GcsObject
  {
    let path =
      gcsObjectPath(source.bucket, source.name)
      + "/copyTo/b/\(Self.encode(destination.bucket))/o/\(Self.encode(destination.name))"
    var request = try makeRequest("POST", path)
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    request.httpBody = Data("{}".utf8)
    let (body, _) = try await send(request, expecting: [200])
    return try object(body)
  }

  /// Uploads `data` in one request (`uploadType=multipart`: the resource, then the bytes).
  @discardableResult
  public func gcsUpload(
    _ data: Data, bucket: String, name: String, contentType: String? = nil, metadata: [String: String] = [:]
  ) async throws(LarderClientError) -> GcsObject {
    let boundary = "larder-" + UUID().uuidString
    var body = Data("--\(boundary)\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".utf8)
    body += try resourceJSON(name: name, contentType: contentType, metadata: metadata)
    body += Data(
      "\r\n--\(boundary)\r\nContent-Type: \(contentType ?? "application/octet-stream")\r\n\r\n".utf8)
    body += data
    body += Data("\r\n--\(boundary)--\r\n".utf8)
    var request = try makeRequest(
      "POST", "/upload/storage/v1/b/\(Self.encode(bucket))/o", query: [("uploadType", "multipart")])
    request.setValue("multipart/related; boundary=\(boundary)", forHTTPHeaderField: "Content-Type")
    request.httpBody = body
    let (answer, _) = try await send(request, expecting: [200])
    return try object(answer)
  }

  /// Starts a resumable upload session (`uploadType=resumable`) and returns its URI, which
  /// ``gcsResumeUpload(session:fileAt:chunkSize:progress:)`` continues, in this process or a later one.
  public func gcsStartResumableUpload(
    bucket: String, name: String, size: Int64, contentType: String? = nil, metadata: [String: String] = [:]
  ) async throws(LarderClientError) -> URL {
    var request = try makeRequest(
      "POST", "/upload/storage/v1/b/\(Self.encode(bucket))/o", query: [("uploadType", "resumable")])
    request.setValue("application/json; charset=UTF-8", forHTTPHeaderField: "Content-Type")
    request.setValue(String(size), forHTTPHeaderField: "X-Upload-Content-Length")
    if let contentType { request.setValue(contentType, forHTTPHeaderField: "X-Upload-Content-Type") }
    request.httpBody = try resourceJSON(name: name, contentType: contentType, metadata: metadata)
    let (_, response) = try await send(request, expecting: [200, 201])
    guard let location = response.value(forHTTPHeaderField: "Location"),
      let session = URL(string: location, relativeTo: baseURL)?.absoluteURL
    else { throw .invalidResponse("the resumable upload's start answered no usable Location") }
    return session
  }

  /// Asks a session where it stands (`PUT`, `Content-Range: bytes */SIZE`, no body): 308 with
  /// `Range: bytes=0-X` while incomplete; at SIZE the server finishes the object and answers it.
  /// - Throws: `.server` 404 when the session expired or was cancelled.
  public func gcsSessionState(_ session: URL, size: Int64) async throws(LarderClientError) -> GcsSessionState
  {
    var request = request("PUT", session)
    request.setValue("bytes */\(size)", forHTTPHeaderField: "Content-Range")
    request.httpBody = Data()
    return try await sessionAnswer(request)
  }

  /// Sends `chunk` at `offset` of a `total`-byte upload.
  func gcsPutChunk(_ session: URL, _ chunk: Data, offset: Int64, total: Int64) async throws(LarderClientError)
    -> GcsSessionState
  {
    var request = request("PUT", session)
    request.setValue(
      "bytes \(offset)-\(offset + Int64(chunk.count) - 1)/\(total)", forHTTPHeaderField: "Content-Range")
    request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
    request.httpBody = chunk
    return try await sessionAnswer(request)
  }

  func sessionAnswer(_ request: URLRequest) async throws(LarderClientError) -> GcsSessionState {
    let (body, response) = try await send(request, expecting: [200, 201, 308])
    guard response.statusCode == 308 else { return .complete(try object(body)) }
    guard let range = response.value(forHTTPHeaderField: "Range") else { return .incomplete(offset: 0) }
    guard range.hasPrefix("bytes=0-"), let last = Int64(range.dropFirst("bytes=0-".count)), last >= 0 else {
      throw .invalidResponse("a 308 answered Range \(range.prefix(60))")
    }
    return .incomplete(offset: last + 1)
  }

  /// Sends the file at `url` to the session from where the server says it stands, in
  /// `chunkSize` pieces; after a failed chunk it waits (``RetryPolicy``), asks the session again
  /// and goes on, up to `retryPolicy.maxAttempts` consecutive failures.
  /// - Throws: `.file` when the file cannot be read (or changed size), `.server` (404: the
  ///   session is gone; 403, 413, …), `.transport` once the retries are spent.
  public func gcsResumeUpload(
    session: URL, fileAt url: URL, chunkSize: Int = 8 << 20, progress: ProgressHandler? = nil
  ) async throws(LarderClientError) -> GcsObject {
    guard chunkSize > 0 else { throw .invalidArgument("chunkSize must be positive") }
    let length = try Self.fileSize(url)
    let handle: FileHandle
    do { handle = try FileHandle(forReadingFrom: url) } catch {
      throw .file("cannot open \(url.path): \(error)")
    }
    defer { try? handle.close() }
    var state = try await gcsSessionState(session, size: length)
    var failures = 0
    var needsState = false
    while true {
      do throws(LarderClientError) {
        if needsState {
          state = try await gcsSessionState(session, size: length)
          needsState = false
        }
        guard case .incomplete(let offset) = state else { break }
        guard offset < length else {
          throw LarderClientError.invalidResponse("the server holds \(offset) bytes of a \(length)-byte file")
        }
        progress?(offset, length)
        let count = Int(min(Int64(chunkSize), length - offset))
        let chunk = try Self.read(handle, at: offset, count: count, path: url.path)
        state = try await gcsPutChunk(session, chunk, offset: offset, total: length)
        failures = 0
      } catch {
        try await backOff(after: error, failures: &failures)
        needsState = true
      }
    }
    guard case .complete(let object) = state else { preconditionFailure("the loop ends complete") }
    progress?(length, length)
    return object
  }

  /// Trades a service account's signed assertion for an access token at `tokenURI` (the key
  /// file's `token_uri`), with no bearer token of its own.
  /// - Throws: `.server` with the OAuth error (`invalid_grant`, …) as its status and its
  ///   description as its message.
  public func exchangeAssertion(_ assertion: String, at tokenURI: URL) async throws(LarderClientError)
    -> AccessToken
  {
    var request = request("POST", tokenURI)
    request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
    let form =
      "grant_type=\(Self.encode("urn:ietf:params:oauth:grant-type:jwt-bearer"))&assertion=\(Self.encode(assertion))"
    request.httpBody = Data(form.utf8)
    let body: Data
    do throws(LarderClientError) {
      (body, _) = try await send(request, expecting: [200], authorized: false)
    } catch .server(let e) {
      struct OAuthError: Decodable {
        var error: String
        var error_description: String?
      }
      let oauth = Data(e.message.utf8)
      if let answer = try? JSONDecoder().decode(OAuthError.self, from: oauth) {
        throw .server(
          LarderAPIError(code: e.code, status: answer.error, message: answer.error_description ?? ""))
      }
      throw .server(e)
    }
    struct Grant: Decodable {
      var access_token: String
      var expires_in: Double?
    }
    let grant = try decode(Grant.self, body)
    return AccessToken(
      token: grant.access_token, expiresAt: Date().addingTimeInterval(grant.expires_in ?? 3600))
  }

  func object(_ body: Data) throws(LarderClientError) -> GcsObject {
    var object = try decode(GcsObject.self, body)
    object.json = body
    return object
  }

  func resourceJSON(name: String, contentType: String?, metadata: [String: String]) throws(LarderClientError)
    -> Data
  {
    var resource: [String: Any] = ["name": name]
    if let contentType { resource["contentType"] = contentType }
    if !metadata.isEmpty { resource["metadata"] = metadata }
    do { return try JSONSerialization.data(withJSONObject: resource, options: [.sortedKeys]) } catch {
      throw .invalidArgument("cannot encode the object's resource: \(error)")
    }
  }
}
