import Foundation

extension S3Client {
  /// Makes part `number` of a multipart upload from `range` of another object of the bucket,
  /// server-side (`UploadPartCopy`): no byte passes through this process. Retried on transient
  /// failures (the last copy of a part number counts).
  ///
  /// - Throws: ``S3Error`` (404 when the source is missing; S3 may also answer 200 with an
  ///   `<Error>` document, which is an error too).
  public func uploadPartCopy(key: String, uploadID: String, number: Int, sourceKey: String, range: Range<Int64>)
    throws -> S3Part
  {
    precondition(!range.isEmpty, "a copied part has bytes")
    let response = try request(
      "PUT", operation: "UploadPartCopy", key: key,
      query: [("partNumber", String(number)), ("uploadId", uploadID)],
      headers: [
        "x-amz-copy-source: \(copySource(sourceKey))",
        "x-amz-copy-source-range: bytes=\(range.lowerBound)-\(range.upperBound - 1)",
      ], retried: true)
    let root = try Self.document(response, operation: "UploadPartCopy", key: key, expecting: "CopyPartResult")
    guard let etag = root["ETag"]?.unquoted, !etag.isEmpty else {
      throw S3Error(.invalidResponse, operation: "UploadPartCopy", key: key, detail: "no ETag for part \(number)")
    }
    return S3Part(number: number, etag: etag, size: Int64(range.count))
  }

  /// `x-amz-copy-source`: `/bucket/key`, the key percent-encoded as in a URL path.
  func copySource(_ sourceKey: String) -> String {
    "/\(configuration.bucket)/\(S3Encoding.encode(sourceKey, keepSlash: true))"
  }
}

// TEMPORARY until the s3prims branch's copyObject lands.
extension S3Client {
  @discardableResult
  public func copyObject(from sourceKey: String, to key: String) throws -> String {
    let response = try request(
      "PUT", operation: "CopyObject", key: key, headers: ["x-amz-copy-source: \(copySource(sourceKey))"],
      retried: true)
    let root = try Self.document(response, operation: "CopyObject", key: key, expecting: "CopyObjectResult")
    return root["ETag"]?.unquoted ?? ""
  }
}
