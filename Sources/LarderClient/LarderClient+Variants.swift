import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

extension LarderClient {
  /// The download URL of `name`, or of its image `variant`: with a download `token` (from the
  /// object's `downloadTokens`) it needs no `Authorization`, so it can go in an `<img src>` or on
  /// a model. A variant is readable exactly when its source is.
  ///
  /// ```swift
  /// let url = try client.downloadURL(
  ///   name: "users/u1/a.jpg", token: meta.downloadTokens[0], variant: .init(width: 64, format: .webp))
  /// ```
  /// - Throws: `.invalidArgument` when no URL can be made of the base URL and name.
  public func downloadURL(name: String, token: String? = nil, variant: ImageVariantRequest? = nil)
    throws(LarderClientError) -> URL
  {
    var query = [("alt", "media")]
    if let token { query.append(("token", token)) }
    query += (variant?.queryItems ?? []).map { ($0.name, $0.value) }
    guard let url = try makeRequest("GET", objectPath(name), query: query).url else {
      throw .invalidArgument("cannot make a URL for \(name.prefix(200))")
    }
    return url
  }

  /// Downloads an image variant of `name` (rendered by the server, or from its cache), with
  /// what the server answered about it: its type (without `format`, chosen from `accept`) and
  /// its `ETag`, the variant's SHA-256.
  ///
  /// ```swift
  /// let thumb = try await client.download(name: "a.jpg", variant: .init(width: 200, height: 200))
  /// ```
  /// - Throws: `.server` with 400 (a bad parameter), 415 (not an image), 422 (too many pixels,
  ///   undecodable), 503 (renders queued; retry); `.tooLarge` over `maxSize`.
  public func download(
    name: String, variant: ImageVariantRequest, accept: String? = nil, maxSize: Int64? = nil
  ) async throws(LarderClientError) -> (data: Data, contentType: String, etag: String?) {
    var query = [("alt", "media")] + variant.queryItems.map { ($0.name, $0.value) }
    if let maxSize { query.append(("maxSize", String(maxSize))) }
    var request = try makeRequest("GET", objectPath(name), query: query)
    if let accept { request.setValue(accept, forHTTPHeaderField: "Accept") }
    let (body, response) = try await send(request, expecting: [200])
    let type = response.value(forHTTPHeaderField: "Content-Type") ?? "application/octet-stream"
    return (body, type, response.value(forHTTPHeaderField: "ETag"))
  }
}
