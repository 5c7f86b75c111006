import Foundation
import Larder
import LarderCrypto

/// The JSON resource a Firebase SDK sends with an upload (the multipart's first part, or the
/// body of a resumable `start`).
///
/// ```json
/// {"name": "photos/a.png", "contentType": "image/png", "metadata": {"Owner": "u1"},
///  "cacheControl": "public, max-age=60"}
/// ```
/// The SDK sends `name` and `contentType` always, the other writable fields only when the app
/// set them. Read-only fields another SDK may echo (`bucket`, `size`, …) are ignored; a writable
/// field of the wrong type is refused, so nothing is stored with metadata Larder misread.
struct FirebaseUploadMetadata: Codable, Equatable, Sendable {
  var name: String?
  var contentType: String?
  /// Custom metadata; keys keep their case.
  var metadata: [String: String]?
  var cacheControl: String?
  var contentDisposition: String?
  var contentEncoding: String?
  var contentLanguage: String?
  /// Base64 MD5 of the content, checked like `Content-MD5`.
  var md5Hash: String?
  /// Base64 of the content's CRC32C, big-endian (GCS clients send it), checked too.
  var crc32c: String?

  /// Parses the resource; an empty body is an empty resource.
  /// - Throws: ``LarderError/invalidArgument(_:)`` for anything but a JSON object with string fields.
  static func parse(_ body: [UInt8]) throws -> FirebaseUploadMetadata {
    if body.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) { return .init() }
    guard let json = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
      throw LarderError.invalidArgument("the upload's metadata must be a JSON object")
    }
    func string(_ key: String) throws -> String? {
      guard let value = json[key], !(value is NSNull) else { return nil }
      guard let s = value as? String else { throw LarderError.invalidArgument("\(key) must be a string") }
      return s
    }
    var resource = FirebaseUploadMetadata()
    resource.name = try string("name")
    resource.contentType = try string("contentType")
    resource.cacheControl = try string("cacheControl")
    resource.contentDisposition = try string("contentDisposition")
    resource.contentEncoding = try string("contentEncoding")
    resource.contentLanguage = try string("contentLanguage")
    resource.md5Hash = try string("md5Hash")
    resource.crc32c = try string("crc32c")
    if let custom = json["metadata"], !(custom is NSNull) {
      guard let map = custom as? [String: Any] else { throw LarderError.invalidArgument("metadata must be an object") }
      var out: [String: String] = [:]
      for (key, value) in map where !(value is NSNull) {
        guard let s = value as? String else {
          throw LarderError.invalidArgument("metadata values must be strings (key '\(key.prefix(60))')")
        }
        out[key] = s
      }
      resource.metadata = out
    }
    return resource
  }

  /// The object name: `?name=` and the JSON's `name` must agree when both are given.
  /// - Throws: ``LarderError/invalidArgument(_:)`` when they differ or neither is there.
  func objectName(query: String?, bucket: String) throws -> String {
    switch (query, name) {
    case (let q?, let n?) where q != n:
      throw LarderError.invalidArgument(
        "the metadata's name '\(n.prefix(100))' differs from ?name='\(q.prefix(100))'")
    case (let q?, _): return q
    case (nil, let n?): return n
    case (nil, nil):
      throw LarderError.invalidArgument("the object name is required: POST /v0/b/\(bucket)/o?name=NAME")
    }
  }

  /// The declared type: the JSON's `contentType`, else `fallback` (a header), else none.
  func declaredType(fallback: String? = nil) -> String? {
    (contentType ?? fallback).flatMap { $0.isEmpty ? nil : $0 }
  }

  /// The write options this resource asks for (check them with `ObjectWriteOptions.validate()`).
  func writeOptions(declaredFallback: String? = nil, ifGenerationMatch: Int64? = nil) -> ObjectWriteOptions {
    ObjectWriteOptions(
      declaredContentType: declaredType(fallback: declaredFallback), metadata: metadata ?? [:],
      cacheControl: cacheControl.flatMap { $0.isEmpty ? nil : $0 },
      contentDisposition: contentDisposition.flatMap { $0.isEmpty ? nil : $0 },
      contentEncoding: contentEncoding.flatMap { $0.isEmpty ? nil : $0 },
      contentLanguage: contentLanguage.flatMap { $0.isEmpty ? nil : $0 }, ifGenerationMatch: ifGenerationMatch)
  }

  /// The 16 bytes `md5Hash` names, nil when absent.
  /// - Throws: ``LarderError/invalidArgument(_:)`` when it is not the base64 of 16 bytes.
  func expectedMD5() throws -> [UInt8]? {
    guard let md5Hash, !md5Hash.isEmpty else { return nil }
    guard let data = Data(base64Encoded: md5Hash), data.count == 16 else {
      throw LarderError.invalidArgument("md5Hash must be the base64 of 16 bytes")
    }
    return Array(data)
  }

  /// The CRC32C `crc32c` names, nil when absent.
  /// - Throws: ``LarderError/invalidArgument(_:)`` when it is not the base64 of 4 bytes.
  func expectedCRC32C() throws -> UInt32? {
    guard let crc32c, !crc32c.isEmpty else { return nil }
    guard let data = Data(base64Encoded: crc32c), data.count == 4 else {
      throw LarderError.invalidArgument("crc32c must be the base64 of 4 bytes")
    }
    return data.reduce(0) { $0 << 8 | UInt32($1) }
  }

  /// Checks `staged` against the `crc32c` given (before it is published): on the CRC32C kept as
  /// its bytes arrived, else reading them once (a session resumed cold).
  /// - Throws: ``LarderError/checksumMismatch(algorithm:expected:actual:)``, I/O errors.
  func checkCRC32C(_ staged: StagedBlob) throws {
    guard let expected = try expectedCRC32C() else { return }
    if staged.crc32c == nil { try staged.computeChecksums() }
    let actual = staged.crc32c ?? 0
    guard actual == expected else {
      throw LarderError.checksumMismatch(
        algorithm: "crc32c", expected: crc32c ?? "", actual: Data(CRC32C.bytes(actual)).base64EncodedString())
    }
  }

  // MARK: - keeping it with a resumable upload

  /// The key under which a resumable upload's row keeps this resource (as JSON), beside `name`
  /// and `contentType`, which the upload store reads itself.
  static let uploadMetadataKey = "firebase"

  /// The upload row's metadata for a resumable session.
  func uploadMetadata(name: String, declaredType: String?) throws -> [String: String] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    var out = ["name": name, Self.uploadMetadataKey: String(decoding: try encoder.encode(self), as: UTF8.self)]
    if let declaredType { out["contentType"] = declaredType }
    return out
  }

  /// The resource a resumable session was started with.
  static func fromUpload(_ metadata: [String: String]) -> FirebaseUploadMetadata {
    metadata[uploadMetadataKey].flatMap { try? JSONDecoder().decode(Self.self, from: Data($0.utf8)) } ?? .init()
  }
}
