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
  /// The type the client declared (or `application/octet-stream`), as Firebase reports it; it
  /// is what downloads are labelled with. The type found in the bytes is ``detectedContentType``.
  public var contentType: String
  public var metadata: [String: String]
  public var downloadTokens: [String]
  public var cacheControl: String?
  public var contentDisposition: String?
  /// Sent as `Content-Encoding` on download (e.g. `gzip` for content stored compressed).
  public var contentEncoding: String?
  /// Sent as `Content-Language` on download.
  public var contentLanguage: String?
  public var timeCreated: Date
  public var updated: Date

  /// The type libmagic found in the content: what rules that must not trust the client check,
  /// and (with ``contentType``) what decides whether a download is forced to be an attachment.
  public var detectedContentType: String { file.contentType }

  /// The metadata resource as Firebase Storage's REST API shapes it, plus `sha256` and
  /// `detectedContentType`.
  public var firebaseMetadata: FirebaseObjectMetadata { firebaseMetadata(includingTokens: true) }

  /// The same without `downloadTokens` (omitted from the JSON), for callers who may not read
  /// the content: a token grants it.
  public func firebaseMetadata(includingTokens: Bool) -> FirebaseObjectMetadata {
    FirebaseObjectMetadata(
      name: name, bucket: bucket, generation: String(generation), metageneration: String(metageneration),
      contentType: contentType, detectedContentType: detectedContentType, size: String(file.size),
      md5Hash: file.md5.isEmpty ? nil : file.md5Base64, sha256: file.sha256, timeCreated: Self.timestamp(timeCreated),
      updated: Self.timestamp(updated), downloadTokens: includingTokens ? downloadTokens.joined(separator: ",") : nil,
      metadata: metadata.isEmpty ? nil : metadata, cacheControl: cacheControl,
      contentDisposition: contentDisposition, contentEncoding: contentEncoding ?? "identity",
      contentLanguage: contentLanguage, storageClass: "STANDARD")
  }

  /// RFC 3339 with milliseconds, UTC, as Firebase writes times.
  public static func timestamp(_ date: Date) -> String {
    date.millisecondTimestamp
      ?? date.formatted(
        Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!))
  }
}

/// The JSON shape of an object's metadata (field names as Firebase uses them).
///
/// `contentType` is the declared type, as in Firebase; `detectedContentType` and `sha256` are
/// Larder's additions. (Before Firebase's semantics were adopted, `contentType` was the detected
/// type and the declared one `declaredContentType`; that field is gone.)
public struct FirebaseObjectMetadata: Codable, Sendable, Equatable {
  public var name: String
  public var bucket: String
  public var generation: String
  public var metageneration: String
  public var contentType: String
  public var detectedContentType: String
  public var size: String
  /// Absent until known: content over ``FileStore/inlineMD5Limit`` uploaded without a client
  /// MD5 gets it from the background hasher moments after the commit (``MD5Backfill``).
  public var md5Hash: String?
  public var sha256: String
  public var timeCreated: String
  public var updated: String
  /// Comma-separated; nil (absent from the JSON) where the caller may not have them.
  public var downloadTokens: String?
  public var metadata: [String: String]?
  public var cacheControl: String?
  public var contentDisposition: String?
  /// `identity` unless one was set, as Firebase reports it.
  public var contentEncoding: String
  public var contentLanguage: String?
  public var storageClass: String
}

/// What a write of new content carries besides the bytes.
public struct ObjectWriteOptions: Sendable {
  /// The client's type; the object's `contentType` (see ``contentType``).
  public var declaredContentType: String?
  public var filename: String?
  public var metadata: [String: String]
  public var cacheControl: String?
  public var contentDisposition: String?
  public var contentEncoding: String?
  public var contentLanguage: String?
  /// Write only if the current generation is this (0: only if the object does not exist).
  public var ifGenerationMatch: Int64?

  public init(
    declaredContentType: String? = nil, filename: String? = nil, metadata: [String: String] = [:],
    cacheControl: String? = nil, contentDisposition: String? = nil, contentEncoding: String? = nil,
    contentLanguage: String? = nil, ifGenerationMatch: Int64? = nil
  ) {
    self.declaredContentType = declaredContentType
    self.filename = filename
    self.metadata = metadata
    self.cacheControl = cacheControl
    self.contentDisposition = contentDisposition
    self.contentEncoding = contentEncoding
    self.contentLanguage = contentLanguage
    self.ifGenerationMatch = ifGenerationMatch
  }

  /// The `contentType` the object will report: the declared type when it is a printable, short
  /// value, else `application/octet-stream` (as Firebase answers for an upload that declares none).
  /// Rules see this as `request.resource.contentType`, before and after the bytes arrive.
  public var contentType: String {
    declaredContentType.flatMap(FileStore.cleanType) ?? "application/octet-stream"
  }

  /// Checks what the write would store as response headers (`cacheControl`, `contentDisposition`,
  /// `contentEncoding`, `contentLanguage`) and the custom metadata, as a PATCH checks them; call it
  /// before reading a body so a bad header is refused before any byte is stored.
  /// - Throws: ``LarderError/invalidArgument(_:)`` naming the field.
  public func validate() throws(LarderError) {
    for (field, value) in [
      ("cacheControl", cacheControl), ("contentDisposition", contentDisposition),
      ("contentEncoding", contentEncoding), ("contentLanguage", contentLanguage),
    ] {
      if let value { _ = try ObjectStore.headerValue(value, field: field) }
    }
    try ObjectStore.validateMetadata(metadata)
  }
}

/// A change to an object's metadata; nil fields are left alone, `.some(nil)` clears
/// (`contentType` back to `application/octet-stream`, as Firebase does).
public struct ObjectPatch: Sendable {
  public var contentType: String??
  public var cacheControl: String??
  public var contentDisposition: String??
  public var contentEncoding: String??
  public var contentLanguage: String??
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
    contentType: String?? = nil, cacheControl: String?? = nil, contentDisposition: String?? = nil,
    contentEncoding: String?? = nil, contentLanguage: String?? = nil,
    metadata: [String: String?]? = nil, clearMetadata: Bool = false, rotateDownloadToken: Bool = false,
    ifMetagenerationMatch: Int64? = nil, ifGenerationMatch: Int64? = nil
  ) {
    self.clearMetadata = clearMetadata
    self.contentType = contentType
    self.cacheControl = cacheControl
    self.contentDisposition = contentDisposition
    self.contentEncoding = contentEncoding
    self.contentLanguage = contentLanguage
    self.metadata = metadata
    self.rotateDownloadToken = rotateDownloadToken
    self.ifMetagenerationMatch = ifMetagenerationMatch
    self.ifGenerationMatch = ifGenerationMatch
  }
}

/// What a listing narrows to beyond its prefix (GCS's list parameters).
public struct ListingRange: Sendable {
  /// Names from this one on (inclusive), as UTF-8 bytes.
  public var startOffset: String?
  /// Names before this one (exclusive).
  public var endOffset: String?
  /// An object whose name ends in the delimiter is listed as an item too, beside its prefix.
  public var includeTrailingDelimiter: Bool
  /// Items whose names match (GCS's `matchGlob`); nil: all. Prefixes are not filtered.
  public var glob: NameGlob?

  public init(
    startOffset: String? = nil, endOffset: String? = nil, includeTrailingDelimiter: Bool = false, glob: NameGlob? = nil
  ) {
    self.startOffset = startOffset
    self.endOffset = endOffset
    self.includeTrailingDelimiter = includeTrailingDelimiter
    self.glob = glob
  }

  func matches(_ name: String) -> Bool { glob?.matches(name) ?? true }

  /// What page tokens are bound to: nothing for the default range, so older tokens stay valid.
  var scope: [String] {
    guard startOffset != nil || endOffset != nil || includeTrailingDelimiter || glob != nil else { return [] }
    return [startOffset ?? "", endOffset ?? "", includeTrailingDelimiter ? "1" : "0", glob?.pattern ?? ""]
  }
}

/// One page of a listing.
public struct ObjectListing: Sendable {
  public var prefixes: [String]
  public var items: [StoredObject]
  /// Opaque; pass back to get the next page. Nil on the last page.
  public var nextPageToken: String?

  public init(prefixes: [String], items: [StoredObject], nextPageToken: String?) {
    self.prefixes = prefixes
    self.items = items
    self.nextPageToken = nextPageToken
  }
}
