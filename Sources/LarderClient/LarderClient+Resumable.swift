import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Resumable uploads over tus 1.0.0 (`/v0/b/{bucket}/uploads`).
///
/// A file goes up in chunks, one `PATCH` each; when a `PATCH` fails (connection lost, server
/// busy or restarting) the client waits, asks the server where the upload stands (`HEAD`) and
/// goes on from that offset, up to `retryPolicy.maxAttempts` consecutive failures. An app that
/// must survive its own restart keeps the URL from ``createUpload(fileAt:name:contentType:metadata:)``
/// and later calls ``resumeUpload(location:fileAt:chunkSize:progress:)``.
///
/// Chunks carry no `Upload-Checksum`: Foundation on Linux has no SHA-256, and this module
/// depends on Foundation only. The server hashes the whole upload itself.
extension LarderClient {
  /// Called after each acknowledged chunk with the bytes the server holds and the total.
  public typealias ProgressHandler = @Sendable (_ sent: Int64, _ total: Int64) -> Void

  static let tusVersion = "1.0.0"
  static let reservedUploadKeys: Set<String> = ["name", "contentType", "filetype", "filename"]

  /// Uploads the file at `url` as `name`: resumable (tus, in `chunkSize` pieces) or in one request.
  ///
  /// ```swift
  /// let meta = try await client.upload(fileAt: video, name: "videos/v1.mp4", contentType: "video/mp4",
  ///                                    progress: { sent, total in print(sent, "/", total) })
  /// ```
  /// - Returns: the object's metadata, read after the upload completed.
  /// - Throws: `.file` when the file cannot be read, `.server` (403, 413, …), `.transport` once
  ///   the retries are spent.
  @discardableResult
  public func upload(
    fileAt url: URL, name: String, contentType: String? = nil, metadata: [String: String] = [:],
    resumable: Bool = true, chunkSize: Int = 8 << 20, progress: ProgressHandler? = nil
  ) async throws(LarderClientError) -> ObjectMetadata {
    guard resumable else {
      let data: Data
      do { data = try Data(contentsOf: url, options: .mappedIfSafe) } catch {
        throw .file("cannot read \(url.path): \(error)")
      }
      let meta = try await upload(data, name: name, contentType: contentType, metadata: metadata)
      progress?(Int64(data.count), Int64(data.count))
      return meta
    }
    let location = try await createUpload(fileAt: url, name: name, contentType: contentType, metadata: metadata)
    return try await resume(location: location, fileAt: url, name: name, chunkSize: chunkSize, progress: progress)
  }

  /// Creates a tus upload for the file at `url` (`POST`, no bytes yet) and returns its URL.
  ///
  /// `Upload-Metadata` carries `name`, `contentType` and `filename` (the file's last path
  /// component); `metadata` becomes the object's custom metadata, keys kept as given.
  /// - Throws: `.invalidArgument` for a reserved or malformed metadata key, `.server`.
  public func createUpload(
    fileAt url: URL, name: String, contentType: String? = nil, metadata: [String: String] = [:]
  ) async throws(LarderClientError) -> URL {
    var pairs = metadata
    for key in pairs.keys {
      guard !Self.reservedUploadKeys.contains(key) else {
        throw .invalidArgument("metadata key \(key.debugDescription) is reserved by the upload itself")
      }
      guard !key.isEmpty, key.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f && $0 != "," }) else {
        throw .invalidArgument("metadata key \(key.debugDescription) cannot travel in Upload-Metadata")
      }
    }
    pairs["name"] = name
    pairs["filename"] = url.lastPathComponent
    if let contentType { pairs["contentType"] = contentType }
    let length = try Self.fileSize(url)
    var request = try makeRequest("POST", uploadsPath)
    request.setValue(Self.tusVersion, forHTTPHeaderField: "Tus-Resumable")
    request.setValue(String(length), forHTTPHeaderField: "Upload-Length")
    request.setValue(Self.encodeUploadMetadata(pairs), forHTTPHeaderField: "Upload-Metadata")
    let (_, response) = try await send(request, expecting: [201])
    guard let location = response.value(forHTTPHeaderField: "Location"),
      let resolved = URL(string: location, relativeTo: baseURL)?.absoluteURL
    else { throw .invalidResponse("the upload's creation answered no usable Location") }
    return resolved
  }

  /// Continues the tus upload at `location` with the bytes of the file at `url`, from where the
  /// server says it stands, and returns the object's metadata once it is complete.
  /// - Throws: `.invalidArgument` when the file's size is not the upload's length; `.server`
  ///   404 when the upload expired or was terminated.
  @discardableResult
  public func resumeUpload(
    location: URL, fileAt url: URL, chunkSize: Int = 8 << 20, progress: ProgressHandler? = nil
  ) async throws(LarderClientError) -> ObjectMetadata {
    try await resume(location: location, fileAt: url, name: nil, chunkSize: chunkSize, progress: progress)
  }

  /// Deletes an unfinished upload and its partial bytes (tus termination).
  public func cancelUpload(location: URL) async throws(LarderClientError) {
    var request = request("DELETE", location)
    request.setValue(Self.tusVersion, forHTTPHeaderField: "Tus-Resumable")
    _ = try await send(request, expecting: [204])
  }

  /// Where an upload stands on the server (`HEAD`).
  struct UploadState {
    var offset: Int64
    var length: Int64?
    var name: String?
  }

  func uploadState(_ location: URL) async throws(LarderClientError) -> UploadState {
    var request = request("HEAD", location)
    request.setValue(Self.tusVersion, forHTTPHeaderField: "Tus-Resumable")
    let (_, response) = try await send(request, expecting: [200, 204])
    guard let offset = response.value(forHTTPHeaderField: "Upload-Offset").flatMap({ Int64($0) }), offset >= 0 else {
      throw .invalidResponse("HEAD of the upload answered no Upload-Offset")
    }
    let length = response.value(forHTTPHeaderField: "Upload-Length").flatMap { Int64($0) }
    let name = response.value(forHTTPHeaderField: "Upload-Metadata").flatMap { Self.decodeUploadMetadata($0)["name"] }
    return UploadState(offset: offset, length: length, name: name)
  }

  func resume(location: URL, fileAt url: URL, name knownName: String?, chunkSize: Int, progress: ProgressHandler?)
    async throws(LarderClientError) -> ObjectMetadata
  {
    guard chunkSize > 0 else { throw .invalidArgument("chunkSize must be positive") }
    let length = try Self.fileSize(url)
    let handle: FileHandle
    do { handle = try FileHandle(forReadingFrom: url) } catch { throw .file("cannot open \(url.path): \(error)") }
    defer { try? handle.close() }

    var state = try await uploadState(location)
    if let declared = state.length, declared != length {
      throw .invalidArgument("the file has \(length) bytes but the upload expects \(declared)")
    }
    guard let name = knownName ?? state.name, !name.isEmpty else {
      throw .invalidResponse("the upload does not say which object it makes (no name in Upload-Metadata)")
    }
    var offset = state.offset
    guard offset <= length else { throw .invalidResponse("the server holds \(offset) bytes of a \(length)-byte file") }
    progress?(offset, length)
    var failures = 0
    var needsOffset = false
    while offset < length || needsOffset {
      do throws(LarderClientError) {
        if needsOffset {
          state = try await uploadState(location)
          guard state.offset <= length else {
            throw LarderClientError.invalidResponse("the server holds \(state.offset) bytes of a \(length)-byte file")
          }
          if state.offset != offset { progress?(state.offset, length) }
          offset = state.offset
          needsOffset = false
          continue
        }
        let count = Int(min(Int64(chunkSize), length - offset))
        let chunk = try Self.read(handle, at: offset, count: count, path: url.path)
        let next = try await patch(location, offset: offset, chunk: chunk)
        guard next > offset, next <= length else {
          throw LarderClientError.invalidResponse("PATCH at \(offset) answered Upload-Offset \(next)")
        }
        offset = next
        failures = 0
        progress?(offset, length)
      } catch {
        try await backOff(after: error, failures: &failures)
        needsOffset = true
      }
    }
    return try await metadata(name: name)
  }

  /// Appends `chunk` at `offset`; returns the server's new offset.
  func patch(_ location: URL, offset: Int64, chunk: Data) async throws(LarderClientError) -> Int64 {
    var request = request("PATCH", location)
    request.setValue(Self.tusVersion, forHTTPHeaderField: "Tus-Resumable")
    request.setValue("application/offset+octet-stream", forHTTPHeaderField: "Content-Type")
    request.setValue(String(offset), forHTTPHeaderField: "Upload-Offset")
    request.httpBody = chunk
    let (_, response) = try await send(request, expecting: [204, 200])
    guard let next = response.value(forHTTPHeaderField: "Upload-Offset").flatMap({ Int64($0) }) else {
      throw .invalidResponse("PATCH answered no Upload-Offset")
    }
    return next
  }

  /// After a failed chunk: counts the failure and waits as `retryPolicy` says, or rethrows
  /// `error` when it is final (not ``isRetryable(_:)``, the task is cancelled, or the attempts
  /// are spent). The caller then asks the server where the upload stands and goes on.
  func backOff(after error: LarderClientError, failures: inout Int) async throws(LarderClientError) {
    guard Self.isRetryable(error), !Task.isCancelled else { throw error }
    failures += 1
    if failures >= retryPolicy.maxAttempts { throw error }
    do { try await Task.sleep(for: retryPolicy.delay(beforeAttempt: failures)) } catch {
      throw .transport("cancelled")
    }
  }

  /// Failures worth a `HEAD` and another try: no answer at all, an offset conflict, a lock,
  /// or a server that is busy or briefly down. A 4xx about the request itself is final.
  static func isRetryable(_ error: LarderClientError) -> Bool {
    switch error {
    case .transport: true
    case .server(let e): [409, 423, 429, 500, 502, 503, 504].contains(e.code)
    default: false
    }
  }

  static func fileSize(_ url: URL) throws(LarderClientError) -> Int64 {
    do {
      let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
      guard let size = (attributes[.size] as? NSNumber)?.int64Value else { throw CocoaError(.fileReadUnknown) }
      return size
    } catch {
      throw .file("cannot read the size of \(url.path): \(error)")
    }
  }

  static func read(_ handle: FileHandle, at offset: Int64, count: Int, path: String) throws(LarderClientError) -> Data {
    do {
      try handle.seek(toOffset: UInt64(offset))
      let data = try handle.read(upToCount: count) ?? Data()
      guard data.count == count else { throw CocoaError(.fileReadCorruptFile) }
      return data
    } catch {
      throw .file("cannot read \(count) bytes at \(offset) of \(path) (did the file change?): \(error)")
    }
  }

  /// `key base64(value)` pairs, keys sorted; an empty value is sent as the bare key.
  static func encodeUploadMetadata(_ metadata: [String: String]) -> String {
    metadata.keys.sorted().map { key in
      let value = metadata[key] ?? ""
      return value.isEmpty ? key : "\(key) \(Data(value.utf8).base64EncodedString())"
    }.joined(separator: ",")
  }

  static func decodeUploadMetadata(_ header: String) -> [String: String] {
    var result: [String: String] = [:]
    for pair in header.split(separator: ",") {
      let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: " ", maxSplits: 1)
      guard let key = parts.first else { continue }
      let value = parts.count == 2 ? Data(base64Encoded: String(parts[1])).flatMap { String(data: $0, encoding: .utf8) } : ""
      result[String(key)] = value ?? ""
    }
    return result
  }
}
