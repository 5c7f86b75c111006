import Foundation

/// An object's metadata, with Firebase Storage's field names.
///
/// On the wire `size`, `generation` and `metageneration` are strings and `downloadTokens` is a
/// comma-separated string (Firebase's shape); here they are numbers and a list.
/// `contentType` is the type the uploader declared (`application/octet-stream` when none), as
/// Firebase reports it; `detectedContentType` is what the server found in the bytes.
public struct ObjectMetadata: Sendable, Equatable, Decodable {
  public var name: String
  public var bucket: String
  public var generation: Int64
  public var metageneration: Int64
  public var contentType: String
  /// Nil only from a server older than this field.
  public var detectedContentType: String?
  public var size: Int64
  /// Base64 of the MD5 digest, as Firebase sends it.
  public var md5Hash: String
  /// Lower-case hex SHA-256: the content address, also the download's `ETag`.
  public var sha256: String
  public var timeCreated: Date
  public var updated: Date
  public var downloadTokens: [String]
  public var metadata: [String: String]
  public var cacheControl: String?
  public var contentDisposition: String?
  /// Nil when none was set (the server reports `identity`).
  public var contentEncoding: String?
  public var contentLanguage: String?

  enum CodingKeys: String, CodingKey {
    case name, bucket, generation, metageneration, contentType, detectedContentType, size, md5Hash, sha256
    case timeCreated, updated, downloadTokens, metadata, cacheControl, contentDisposition, contentEncoding
    case contentLanguage
  }

  public init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    func number(_ key: CodingKeys) throws -> Int64 {
      let text = try c.decode(String.self, forKey: key)
      guard let n = Int64(text) else {
        throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "'\(text)' is not an integer")
      }
      return n
    }
    func date(_ key: CodingKeys) throws -> Date {
      let text = try c.decode(String.self, forKey: key)
      if let d = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return d }
      if let d = try? Date.ISO8601FormatStyle().parse(text) { return d }
      throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "'\(text)' is not an ISO 8601 time")
    }
    name = try c.decode(String.self, forKey: .name)
    bucket = try c.decode(String.self, forKey: .bucket)
    generation = try number(.generation)
    metageneration = try number(.metageneration)
    contentType = try c.decode(String.self, forKey: .contentType)
    detectedContentType = try c.decodeIfPresent(String.self, forKey: .detectedContentType)
    size = try number(.size)
    // Absent while the server has not computed it yet (large content, just uploaded).
    md5Hash = try c.decodeIfPresent(String.self, forKey: .md5Hash) ?? ""
    sha256 = try c.decode(String.self, forKey: .sha256)
    timeCreated = try date(.timeCreated)
    updated = try date(.updated)
    let tokens = try c.decodeIfPresent(String.self, forKey: .downloadTokens) ?? ""
    downloadTokens = tokens.split(separator: ",").map(String.init)
    metadata = try c.decodeIfPresent([String: String].self, forKey: .metadata) ?? [:]
    cacheControl = try c.decodeIfPresent(String.self, forKey: .cacheControl)
    contentDisposition = try c.decodeIfPresent(String.self, forKey: .contentDisposition)
    contentEncoding = try c.decodeIfPresent(String.self, forKey: .contentEncoding).flatMap {
      $0 == "identity" ? nil : $0
    }
    contentLanguage = try c.decodeIfPresent(String.self, forKey: .contentLanguage)
  }
}

/// One object of a listing: its name and bucket, as Firebase lists them (fetch its metadata
/// with a `get`, which the rules may allow or not).
public struct ObjectListItem: Sendable, Equatable, Decodable {
  public var name: String
  public var bucket: String
}

/// One page of a listing, as the server answers it.
public struct ObjectListPage: Sendable, Equatable, Decodable {
  /// The "sub-folders" under the prefix, when a delimiter was given.
  public var prefixes: [String]
  public var items: [ObjectListItem]
  /// Pass back as `pageToken` for the next page; `nil` on the last page.
  public var nextPageToken: String?

  enum CodingKeys: String, CodingKey { case prefixes, items, nextPageToken }

  public init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    prefixes = try c.decodeIfPresent([String].self, forKey: .prefixes) ?? []
    items = try c.decodeIfPresent([ObjectListItem].self, forKey: .items) ?? []
    nextPageToken = try c.decodeIfPresent(String.self, forKey: .nextPageToken)
  }
}

/// A whole listing: every page followed.
public struct ObjectList: Sendable, Equatable {
  public var prefixes: [String]
  public var items: [ObjectListItem]
}
