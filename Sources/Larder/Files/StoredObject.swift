import Foundation

/// An object: a `File` published under `bucket/name`, with Firebase's metadata.
public struct StoredObject: Sendable, Equatable, Codable {
  public var bucket: String
  public var name: String
  public var file: File
  /// Bumped each time the name is given new content.
  public var generation: Int64
  /// Bumped each time the metadata changes; 1 for new content.
  public var metageneration: Int64
  public var contentType: String
  public var metadata: [String: String]
  public var downloadTokens: [String]
  public var cacheControl: String?
  public var contentDisposition: String?
  public var timeCreated: Date
  public var updated: Date

  /// The metadata resource as Firebase Storage's REST API shapes it, plus `sha256`.
  public var firebaseMetadata: FirebaseObjectMetadata { firebaseMetadata(includingTokens: true) }

  /// The same without `downloadTokens` (omitted from the JSON), for callers who may not read
  /// the content: a token grants it.
  public func firebaseMetadata(includingTokens: Bool) -> FirebaseObjectMetadata {
    FirebaseObjectMetadata(
      name: name, bucket: bucket, generation: String(generation), metageneration: String(metageneration),
      contentType: contentType, declaredContentType: file.declaredContentType, size: String(file.size),
      md5Hash: file.md5Base64, sha256: file.sha256, timeCreated: Self.timestamp(timeCreated),
      updated: Self.timestamp(updated), downloadTokens: includingTokens ? downloadTokens.joined(separator: ",") : nil,
      metadata: metadata.isEmpty ? nil : metadata, cacheControl: cacheControl,
      contentDisposition: contentDisposition, contentEncoding: "identity", storageClass: "STANDARD")
  }

  /// RFC 3339 with milliseconds, UTC, as Firebase writes times.
  public static func timestamp(_ date: Date) -> String {
    date.formatted(
      Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!))
  }
}

/// The JSON shape of an object's metadata (field names as Firebase uses them).
public struct FirebaseObjectMetadata: Codable, Sendable, Equatable {
  public var name: String
  public var bucket: String
  public var generation: String
  public var metageneration: String
  public var contentType: String
  public var declaredContentType: String?
  public var size: String
  public var md5Hash: String
  public var sha256: String
  public var timeCreated: String
  public var updated: String
  /// Comma-separated; nil (absent from the JSON) where the caller may not have them.
  public var downloadTokens: String?
  public var metadata: [String: String]?
  public var cacheControl: String?
  public var contentDisposition: String?
  public var contentEncoding: String
  public var storageClass: String
}

/// What a write of new content carries besides the bytes.
public struct ObjectWriteOptions: Sendable {
  public var declaredContentType: String?
  public var filename: String?
  public var metadata: [String: String]
  public var cacheControl: String?
  public var contentDisposition: String?
  /// Write only if the current generation is this (0: only if the object does not exist).
  public var ifGenerationMatch: Int64?

  public init(
    declaredContentType: String? = nil, filename: String? = nil, metadata: [String: String] = [:],
    cacheControl: String? = nil, contentDisposition: String? = nil, ifGenerationMatch: Int64? = nil
  ) {
    self.declaredContentType = declaredContentType
    self.filename = filename
    self.metadata = metadata
    self.cacheControl = cacheControl
    self.contentDisposition = contentDisposition
    self.ifGenerationMatch = ifGenerationMatch
  }
}

/// A change to an object's metadata; nil fields are left alone, `.some(nil)` clears.
public struct ObjectPatch: Sendable {
  public var contentType: String?
  public var cacheControl: String??
  public var contentDisposition: String??
  /// Keys set to nil are removed; others are set.
  public var metadata: [String: String?]?
  /// Remove every custom metadata key first (then apply `metadata`), in the update's transaction.
  public var clearMetadata: Bool
  /// Replace the download tokens with one fresh token.
  public var rotateDownloadToken: Bool
  public var ifMetagenerationMatch: Int64?
  /// The update applies only to this generation: metadata updates of a replaced object (whose
  /// metageneration restarts at 1) must not pass for updates of the one that was judged.
  public var ifGenerationMatch: Int64?

  public init(
    contentType: String? = nil, cacheControl: String?? = nil, contentDisposition: String?? = nil,
    metadata: [String: String?]? = nil, clearMetadata: Bool = false, rotateDownloadToken: Bool = false,
    ifMetagenerationMatch: Int64? = nil, ifGenerationMatch: Int64? = nil
  ) {
    self.clearMetadata = clearMetadata
    self.contentType = contentType
    self.cacheControl = cacheControl
    self.contentDisposition = contentDisposition
    self.metadata = metadata
    self.rotateDownloadToken = rotateDownloadToken
    self.ifMetagenerationMatch = ifMetagenerationMatch
    self.ifGenerationMatch = ifGenerationMatch
  }
}

/// One page of a listing.
public struct ObjectListing: Sendable {
  public var prefixes: [String]
  public var items: [StoredObject]
  /// Opaque; pass back to get the next page. Nil on the last page.
  public var nextPageToken: String?
}
