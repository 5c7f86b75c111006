import Foundation

/// The multipart calls, public so that an upload can be resumed from another process or node:
/// the upload id and the parts' ETags are all the state S3 needs (see ``listParts(key:uploadID:)``).
extension S3Client {
  /// Starts a multipart upload of `key`.
  ///
  /// - Returns: the upload id.
  /// - Throws: ``S3Error``.
  public func createMultipartUpload(key: String) throws -> String {
    // `uploads=` rather than `uploads`: libcurl 7.88 signs the query as written, and SigV4's
    // canonical form of an empty parameter carries the `=`.
    let response = try request(
      "POST", operation: "CreateMultipartUpload", key: key, query: [("uploads", "")],
      headers: ["Content-Type: application/octet-stream"])
    let root = try Self.document(
      response, operation: "CreateMultipartUpload", key: key, expecting: "InitiateMultipartUploadResult")
    guard let id = root["UploadId"], !id.isEmpty else {
      throw S3Error(.invalidResponse, operation: "CreateMultipartUpload", key: key, detail: "no UploadId")
    }
    return id
  }

  /// Uploads part `number` (1…10000) of an upload; every part but the last must be ≥ 5 MiB.
  /// Retried on transient failures (a part may be sent again: the last one counts).
  ///
  /// - Parameter sha256Hex: the part's SHA-256; computed here (one read of the range) when nil.
  /// - Throws: ``S3Error``.
  public func uploadPart(key: String, uploadID: String, number: Int, body: S3Body, sha256Hex: String? = nil)
    throws -> S3Part
  {
    let hash = try sha256Hex ?? Self.sha256Hex(of: body, operation: "UploadPart", key: key)
    let response = try request(
      "PUT", operation: "UploadPart", key: key,
      query: [("partNumber", String(number)), ("uploadId", uploadID)],
      body: body, payloadHash: hash, retried: true)
    guard let etag = response.headers["etag"]?.unquoted, !etag.isEmpty else {
      throw S3Error(.invalidResponse, operation: "UploadPart", key: key, detail: "no ETag for part \(number)")
    }
    return S3Part(number: number, etag: etag, size: body.length)
  }

  /// Assembles the parts, in number order, into the object.
  ///
  /// - Returns: the object's ETag.
  /// - Throws: ``S3Error`` (400 `InvalidPart`, `EntityTooSmall`, 404 `NoSuchUpload`…), also
  ///   when the store answers 200 followed by an `<Error>` document, as S3 may.
  @discardableResult
  public func completeMultipartUpload(key: String, uploadID: String, parts: [S3Part]) throws -> String {
    var xml = "<CompleteMultipartUpload>"
    for part in parts.sorted(by: { $0.number < $1.number }) {
      xml += "<Part><PartNumber>\(part.number)</PartNumber><ETag>\"\(part.etag)\"</ETag></Part>"
    }
    xml += "</CompleteMultipartUpload>"
    let body = Array(xml.utf8)
    let response = try request(
      "POST", operation: "CompleteMultipartUpload", key: key, query: [("uploadId", uploadID)],
      headers: ["Content-Type: application/xml"], body: .bytes(body),
      payloadHash: Self.sha256Hex(of: .bytes(body), operation: "CompleteMultipartUpload", key: key))
    let root = try Self.document(
      response, operation: "CompleteMultipartUpload", key: key, expecting: "CompleteMultipartUploadResult")
    return root["ETag"]?.unquoted ?? ""
  }

  /// Abandons an upload and frees its parts. Aborting one that is already gone succeeds.
  ///
  /// - Throws: ``S3Error``.
  public func abortMultipartUpload(key: String, uploadID: String) throws {
    do {
      _ = try request(
        "DELETE", operation: "AbortMultipartUpload", key: key, query: [("uploadId", uploadID)], retried: true)
    } catch let error as S3Error where error.status == 404 && error.code == "NoSuchUpload" {
    }
  }

  /// The parts uploaded so far, in number order: what a node that takes over an upload needs
  /// to continue it and complete it.
  ///
  /// - Throws: ``S3Error`` (404 `NoSuchUpload` once completed or aborted).
  public func listParts(key: String, uploadID: String) throws -> [S3Part] {
    var parts: [S3Part] = []
    var marker: String? = nil
    repeat {
      var query = [("uploadId", uploadID)]
      if let marker { query.append(("part-number-marker", marker)) }
      let response = try request("GET", operation: "ListParts", key: key, query: query, retried: true)
      let root = try Self.document(response, operation: "ListParts", key: key, expecting: "ListPartsResult")
      for part in root.children("Part") {
        guard let number = part["PartNumber"].flatMap(Int.init), let etag = part["ETag"]?.unquoted,
          let size = part["Size"].flatMap(Int64.init)
        else {
          throw S3Error(.invalidResponse, operation: "ListParts", key: key, detail: "a part lacks a field")
        }
        parts.append(S3Part(number: number, etag: etag, size: size))
      }
      marker = root["IsTruncated"] == "true" ? root["NextPartNumberMarker"] : nil
    } while marker != nil
    return parts.sorted { $0.number < $1.number }
  }
}
