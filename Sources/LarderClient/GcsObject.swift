import Foundation

/// An object as the GCS JSON API answers it (`storage#object`): sizes and generations arrive
/// as strings and are read as numbers here.
public struct GcsObject: Decodable, Sendable, Equatable {
  public var name: String
  public var bucket: String
  public var size: Int64
  public var contentType: String?
  public var generation: Int64
  public var metageneration: Int64
  /// Base64 MD5 and CRC32C (absent from listings until known).
  public var md5Hash: String?
  public var crc32c: String?
  public var timeCreated: String?
  public var updated: String?
  public var metadata: [String: String]?
  public var cacheControl: String?
  public var contentDisposition: String?
  public var contentEncoding: String?
  public var contentLanguage: String?
  /// The answer's JSON as received, for callers that print it (nil inside listings).
  public var json: Data?

  enum CodingKeys: String, CodingKey {
    case name, bucket, size, contentType, generation, metageneration, md5Hash, crc32c, timeCreated, updated
    case metadata, cacheControl, contentDisposition, contentEncoding, contentLanguage
  }

  public init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    func count(_ key: CodingKeys) throws -> Int64 {
      let text = try c.decodeIfPresent(String.self, forKey: key) ?? "0"
      guard let n = Int64(text), n >= 0 else {
        throw DecodingError.dataCorruptedError(
          forKey: key, in: c, debugDescription: "\(key.rawValue) is not a count")
      }
      return n
    }
    name = try c.decode(String.self, forKey: .name)
    bucket = try c.decode(String.self, forKey: .bucket)
    size = try count(.size)
    generation = try count(.generation)
    metageneration = try count(.metageneration)
    contentType = try c.decodeIfPresent(String.self, forKey: .contentType)
    md5Hash = try c.decodeIfPresent(String.self, forKey: .md5Hash)
    crc32c = try c.decodeIfPresent(String.self, forKey: .crc32c)
    timeCreated = try c.decodeIfPresent(String.self, forKey: .timeCreated)
    updated = try c.decodeIfPresent(String.self, forKey: .updated)
    metadata = try c.decodeIfPresent([String: String].self, forKey: .metadata)
    cacheControl = try c.decodeIfPresent(String.self, forKey: .cacheControl)
    contentDisposition = try c.decodeIfPresent(String.self, forKey: .contentDisposition)
    contentEncoding = try c.decodeIfPresent(String.self, forKey: .contentEncoding)
    contentLanguage = try c.decodeIfPresent(String.self, forKey: .contentLanguage)
  }
}

/// One page of `objects.list`.
public struct GcsObjectPage: Decodable, Sendable {
  public var items: [GcsObject]
  public var prefixes: [String]
  public var nextPageToken: String?

  enum CodingKeys: String, CodingKey { case items, prefixes, nextPageToken }

  public init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    items = try c.decodeIfPresent([GcsObject].self, forKey: .items) ?? []
    prefixes = try c.decodeIfPresent([String].self, forKey: .prefixes) ?? []
    nextPageToken = try c.decodeIfPresent(String.self, forKey: .nextPageToken).flatMap {
      $0.isEmpty ? nil : $0
    }
  }
}

/// Where a resumable upload session stands.
public enum GcsSessionState: Sendable, Equatable {
  /// The server holds the first `offset` bytes.
  case incomplete(offset: Int64)
  /// The object is made.
  case complete(GcsObject)
}

/// What a token endpoint granted (RFC 6749 §5.1).
public struct AccessToken: Sendable, Equatable {
  public var token: String
  public var expiresAt: Date
}
