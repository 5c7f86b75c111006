import Foundation
import Larder
internal import LarderS3

/// The bucket's calls for content: the one place here that speaks S3 for blobs. Every PUT
/// carries the content's SHA-256 as `x-amz-content-sha256`, so the store itself refuses bytes
/// that do not match their address; content over 16 MiB goes up in parts. Errors are the S3
/// client's typed `S3Error` (its `isTransient` tells a 503-and-retry from a refusal), turned into
/// ``LarderError``s by ``translating(_:)``.
extension S3ContentStore {
  /// The URL without its `prefix` setting (which is the store's, not the client's), and the prefix.
  /// `nested`: the prefix may be several such names joined by `/` (a backup destination's
  /// `backups/larder`).
  static func splitPrefix(_ url: String, nested: Bool = false) throws -> (url: String, prefix: String?) {
    guard var components = URLComponents(string: url), let items = components.queryItems,
      let prefix = items.last(where: { $0.name == "prefix" })?.value
    else { return (url, nil) }
    let names = nested ? prefix.split(separator: "/", omittingEmptySubsequences: false) : [Substring(prefix)]
    let allowed = names.allSatisfy { name in
      (1...63).contains(name.utf8.count)
        && name.utf8.allSatisfy {
          ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F || $0 == 0x2D
        }
    }
    guard prefix.utf8.count <= 255, allowed else {
      throw S3ConfigurationError(
        "prefix must be 1 to 63 of a-z, 0-9, _ and -\(nested ? " (or several, joined by /)" : ""), got '\(prefix.prefix(80))'")
    }
    let others = items.filter { $0.name != "prefix" }
    components.queryItems = others.isEmpty ? nil : others
    return (components.string ?? url, prefix)
  }

  private func key(_ address: BlobAddress) -> String { keyPrefix + address.key }

  /// The bucket as an `s3://` URL, without credentials.
  package var location: String {
    let c = client.configuration
    let prefix = keyPrefix.isEmpty ? "" : "&prefix=\(keyPrefix.dropLast())"
    return "s3://\(c.bucket)?endpoint=\(c.endpoint)&region=\(c.region)&path-style=\(c.pathStyle ? 1 : 0)\(prefix)"
  }

  /// Makes `staged` durable at `address`, before the write transaction that names it, never
  /// under the write lock. A staged file is uploaded; content a resumable upload assembled in
  /// the bucket (`uploads/<id>/data`) is copied to its address server-side, never through this
  /// node. Publishing the same content again is harmless: the address is the content.
  func publish(_ staged: StagedBlob, at address: BlobAddress) throws {
    try Self.translating {
      switch staged.bytes {
      case .assembledUpload(let assembled):
        _ = try client.copyObject(from: "\(keyPrefix)uploads/\(assembled)", to: key(address))
      case .file(let path):
        _ = try client.putFile(atPath: path, key: key(address), sha256Hex: staged.sha256Hex)
      }
    }
  }

  /// The stored size at `address`, nil when nothing is stored there.
  func storedSize(of address: BlobAddress) throws -> Int64? {
    try Self.translating { try client.head(key(address))?.size }
  }

  /// The store's own errors as ``LarderError``s, so no S3 type leaves this file: a missing key
  /// is a missing file (`ENOENT`, as the filesystem says), anything else the store said or
  /// could not say is ``LarderError/blobStoreUnavailable(_:)`` (a 503 and a retry). Errors
  /// that are not the store's (a download's client gone) pass through unchanged.
  static func translating<T>(_ body: () throws -> T) throws -> T {
    do {
      return try body()
    } catch let error as S3Error {
      if error.status == 404 { throw LarderError.io(operation: error.operation, path: error.key ?? "", errno: ENOENT) }
      throw LarderError.blobStoreUnavailable(error.description)
    }
  }

  /// Streams `range` of the object at `address` (clamped to its size), a bounded chunk at a
  /// time; a missing object is `io(ENOENT)`.
  func readObject(_ address: BlobAddress, range: Range<Int64>?, _ body: (UnsafeRawBufferPointer) throws -> Void)
    throws
  {
    if let range, range.isEmpty { return }
    try Self.translating {
      do {
        try client.get(
          key(address), range: range.map { $0.lowerBound...($0.upperBound - 1) }, body: body)
      } catch let error as S3Error where error.status == 416 {
        // A range wholly past the end: nothing, as a file read clamps it (the blob's existence is
        // not in doubt: S3 answers 404, not 416, for a missing key).
      }
    }
  }

  /// Removes the object at `address`; nothing stored is fine.
  func remove(_ address: BlobAddress) throws {
    try Self.translating { try client.delete(key(address)) }
  }

  /// Every object at a well-formed address, its size and when it was stored, page by page.
  func forEachStoredBlob(dated body: (_ address: BlobAddress, _ size: Int64, _ stored: Date) throws -> Void)
    throws
  {
    try Self.translating {
      try client.list(prefix: keyPrefix + "sha256/") { object in
        if let address = BlobAddress(key: String(object.key.dropFirst(keyPrefix.count))) {
          // No date is taken as "just now": such a stray waits out the grace period.
          try body(address, object.size, object.lastModified ?? Date())
        }
      }
    }
  }
}

/// Resumable uploads' bytes under `uploads/<id>/`: the multipart upload's key and data object
/// `uploads/<id>/data`, pieces `uploads/<id>/piece-<start>-<end>`.
extension S3ContentStore: SharedUploadStorage {
  private func uploadKey(_ id: String, _ name: String) -> String { "\(keyPrefix)uploads/\(id)/\(name)" }

  package var minimumPartSize: Int64 { 5 << 20 }

  package func startParts(upload id: String, data: String) throws -> String {
    try Self.translating { try client.createMultipartUpload(key: uploadKey(id, data)) }
  }

  package func sendPart(
    upload id: String, data: String, multipart: String, number: Int, file: String, offset: Int64, length: Int64
  ) throws -> SharedUploadState.Part {
    try Self.translating {
      // One read hashes both: SHA-256 for the request, MD5 for the assembly's check.
      let body = S3Body.file(path: file, offset: offset, length: length)
      let hex = try S3Client.sha256AndMD5Hex(of: body)
      let part = try client.uploadPart(
        key: uploadKey(id, data), uploadID: multipart, number: number, body: body, sha256Hex: hex.sha256)
      return SharedUploadState.Part(number: part.number, etag: part.etag, size: part.size, md5: hex.md5)
    }
  }

  package func copyPart(
    upload id: String, data: String, multipart: String, number: Int, from source: String, range: Range<Int64>
  ) throws -> SharedUploadState.Part {
    try Self.translating {
      let part = try client.copyPart(
        key: uploadKey(id, data), uploadID: multipart, number: number, from: uploadKey(id, source),
        range: range.lowerBound...(range.upperBound - 1))
      return SharedUploadState.Part(number: part.number, etag: part.etag, size: part.size)
    }
  }

  package func putPiece(upload id: String, name: String, file: String, offset: Int64, length: Int64) throws {
    try Self.translating {
      _ = try client.put(.file(path: file, offset: offset, length: length), key: uploadKey(id, name))
    }
  }

  package func removePiece(upload id: String, name: String) throws {
    try Self.translating { try client.delete(uploadKey(id, name)) }
  }

  package func readPiece(upload id: String, name: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    try Self.translating { _ = try client.get(uploadKey(id, name), body: body) }
  }

  package func assemble(upload id: String, data: String, multipart: String, parts: [SharedUploadState.Part]) throws
    -> String
  {
    try Self.translating {
      do {
        return try client.completeMultipartUpload(
          key: uploadKey(id, data), uploadID: multipart,
          parts: parts.map { S3Part(number: $0.number, etag: $0.etag, size: $0.size) })
      } catch let error as S3Error where error.code == "InvalidPart" {
        // A listed part is not what the store holds under its number: no retry mends that.
        throw UploadError.assemblyMismatch(id: id)
      }
    }
  }

  package func assembledSize(upload id: String, data: String) throws -> Int64? {
    try Self.translating { try client.head(uploadKey(id, data))?.size }
  }

  package func readData(upload id: String, data: String, range: Range<Int64>?, _ body: (UnsafeRawBufferPointer) throws -> Void)
    throws
  {
    if let range, range.isEmpty { return }
    try Self.translating {
      _ = try client.get(
        uploadKey(id, data), range: range.map { $0.lowerBound...($0.upperBound - 1) }, body: body)
    }
  }

  package func removeUpload(_ id: String, data: String, multipart: String?) throws {
    try Self.translating {
      var keys: [String] = []
      try client.list(prefix: "\(keyPrefix)uploads/\(id)/") { keys.append($0.key) }
      for key in keys { try client.delete(key) }
      // Last: only an upload that was never completed (aborting a completed one is an error on
      // some stores, and nothing on others).
      if let multipart { try client.abortMultipartUpload(key: uploadKey(id, data), uploadID: multipart) }
    }
  }

  package func forEachStoredUpload(_ body: (_ id: String, _ newest: Date) throws -> Void) throws {
    let prefix = "\(keyPrefix)uploads/"
    var current: (id: String, newest: Date)?
    try Self.translating {
      // Keys come sorted, so one upload's keys are consecutive.
      try client.list(prefix: prefix) { object in
        let rest = object.key.dropFirst(prefix.count)
        guard let slash = rest.firstIndex(of: "/") else { return }
        let id = String(rest[..<slash])
        let date = object.lastModified ?? Date()
        if let seen = current, seen.id == id {
          current = (id, max(seen.newest, date))
        } else {
          if let seen = current { try body(seen.id, seen.newest) }
          current = (id, date)
        }
      }
      if let seen = current { try body(seen.id, seen.newest) }
    }
  }
}
