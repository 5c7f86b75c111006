import Foundation

/// Server-side copy: the store copies the bytes itself. A resumable upload spread over nodes
/// completes to a temporary key and is then copied to its content address (`sha256/…`), which
/// it only learns at the end.
extension S3Client {
  /// S3 allows at most this many parts in one upload; a copy in parts grows its part size to stay under it.
  static let maximumPartCount: Int64 = 10_000

  /// How the parts of a large copy are made.
  enum PartCopy {
    /// UploadPartCopy with `x-amz-copy-source-range`: the store copies each range.
    case serverSide
    /// A ranged GET of each part into memory, then UploadPart: the bytes pass through this
    /// process, one part at a time. For a libcurl that cannot sign a ranged UploadPartCopy
    /// (``CurlEasy/sortsSignedHeadersByName``).
    case throughClient

    static var available: PartCopy { CurlEasy.sortsSignedHeadersByName ? .serverSide : .throughClient }
  }

  /// Copies sourceKey (same bucket) to key on the server; objects over 5 GiB (or over a tuning threshold for tests) go as a multipart UploadPartCopy in ranges.
  ///
  /// The source is HEADed first for its size. Up to ``Tuning/copyMultipartThreshold`` it is one
  /// CopyObject. Above it, a multipart upload of `key` in ranges of ``Tuning/partSize`` (larger
  /// when 10 000 parts would not cover the object), then CompleteMultipartUpload; any failure
  /// aborts the upload. The ranges are UploadPartCopy requests when libcurl can sign them
  /// (8.10.0 on); with an older libcurl each range is read with a ranged GET and sent with
  /// UploadPart instead (one part in memory at a time), because its signature of a ranged
  /// UploadPartCopy is refused (see ``CurlEasy/sortsSignedHeadersByName``). Every request is
  /// retried on transient failures, including a 200 answer that carries an `<Error>` document
  /// (S3 sends one when a copy fails after the status line went out).
  ///
  /// ```swift
  /// try s3.copyObject(from: "uploads/\(id)/assembled", to: "sha256/ab/cd/\(hex)")
  /// ```
  /// - Returns: the new object's ETag.
  /// - Throws: ``S3Error``; a missing source is status 404 `NoSuchKey` with operation
  ///   `CopyObject` and key `sourceKey`.
  @discardableResult
  public func copyObject(from sourceKey: String, to key: String) throws -> String {
    guard let source = try head(sourceKey) else {
      throw S3Error(
        .http(status: 404, code: "NoSuchKey", message: "The copy source does not exist."),
        operation: "CopyObject", key: sourceKey)
    }
    if source.size <= tuning.copyMultipartThreshold {
      let root = try retrying(true) {
        try Self.document(
          request("PUT", operation: "CopyObject", key: key, headers: [copySourceHeader(sourceKey)]),
          operation: "CopyObject", key: key, expecting: "CopyObjectResult")
      }
      return root["ETag"]?.unquoted ?? ""
    }
    return try copyInParts(from: sourceKey, size: source.size, to: key, how: .available)
  }

  /// The multipart half of ``copyObject(from:to:)``, `how` chosen by the caller (tests try both).
  func copyInParts(from sourceKey: String, size: Int64, to key: String, how: PartCopy) throws -> String {
    let partSize = max(tuning.partSize, (size + Self.maximumPartCount - 1) / Self.maximumPartCount)
    let uploadID = try createMultipartUpload(key: key)
    do {
      var parts: [S3Part] = []
      var offset: Int64 = 0
      while offset < size {
        let range = offset...(offset + min(partSize, size - offset) - 1)
        parts.append(
          try copyPart(key: key, uploadID: uploadID, number: parts.count + 1, from: sourceKey, range: range, how: how))
        offset = range.upperBound + 1
      }
      return try completeMultipartUpload(key: key, uploadID: uploadID, parts: parts)
    } catch {
      try? abortMultipartUpload(key: key, uploadID: uploadID)
      throw error
    }
  }

  /// Makes part `number` of an upload from `range` (inclusive offsets) of another object of the
  /// bucket: server-side when this libcurl can sign it, else through this process, the range in
  /// memory (see ``PartCopy``). What a large copy and a reopened resumable upload are made of.
  ///
  /// - Throws: ``S3Error`` (404 when the source is missing).
  public func copyPart(key: String, uploadID: String, number: Int, from sourceKey: String, range: ClosedRange<Int64>)
    throws -> S3Part
  {
    try copyPart(key: key, uploadID: uploadID, number: number, from: sourceKey, range: range, how: .available)
  }

  func copyPart(
    key: String, uploadID: String, number: Int, from sourceKey: String, range: ClosedRange<Int64>, how: PartCopy
  ) throws -> S3Part {
    switch how {
    case .serverSide:
      return try uploadPartCopy(key: key, uploadID: uploadID, number: number, from: sourceKey, range: range)
    case .throughClient:
      let bytes = try read(sourceKey, range: range)
      return try uploadPart(key: key, uploadID: uploadID, number: number, body: .bytes(bytes))
    }
  }

  /// UploadPartCopy: part `number` of an upload is `range` (inclusive offsets) of the source.
  func uploadPartCopy(
    key: String, uploadID: String, number: Int, from sourceKey: String, range: ClosedRange<Int64>
  )
    throws -> S3Part
  {
    let root = try retrying(true) {
      try Self.document(
        request(
          "PUT", operation: "UploadPartCopy", key: key,
          query: [("partNumber", String(number)), ("uploadId", uploadID)],
          headers: [
            copySourceHeader(sourceKey),
            "x-amz-copy-source-range: bytes=\(range.lowerBound)-\(range.upperBound)",
          ]),
        operation: "UploadPartCopy", key: key, expecting: "CopyPartResult")
    }
    guard let etag = root["ETag"]?.unquoted, !etag.isEmpty else {
      throw S3Error(
        .invalidResponse, operation: "UploadPartCopy", key: key, detail: "no ETag for part \(number)")
    }
    return S3Part(number: number, etag: etag, size: Int64(range.count))
  }

  /// `range` of an object in memory, the whole GET retried on transient failures (a failed
  /// attempt's bytes are dropped, so nothing is delivered twice).
  private func read(_ key: String, range: ClosedRange<Int64>) throws -> [UInt8] {
    try retrying(true) {
      var bytes: [UInt8] = []
      bytes.reserveCapacity(range.count)
      try get(key, range: range) { bytes.append(contentsOf: $0) }
      guard bytes.count == range.count else {
        throw S3Error(
          .invalidResponse, operation: "GetObject", key: key,
          detail: "\(bytes.count) bytes for the range \(range.lowerBound)-\(range.upperBound)")
      }
      return bytes
    }
  }

  /// `x-amz-copy-source: /BUCKET/KEY`, the key URI-encoded as in a path (every byte but
  /// `A-Z a-z 0-9 - . _ ~ /` as `%XX`): S3 decodes it once, so spaces, `+`, `%`, `?` and
  /// non-ASCII keys arrive as they are.
  func copySourceHeader(_ sourceKey: String) -> String {
    "x-amz-copy-source: /\(configuration.bucket)/\(S3Encoding.encode(sourceKey, keepSlash: true))"
  }
}
