import Foundation

/// What HEAD (and the start of a GET) says about an object.
public struct S3ObjectHead: Sendable, Equatable {
  /// The object's size (for a ranged GET: the length of the part being sent).
  public var size: Int64
  /// The ETag without quotes: the MD5 for a single PUT, `md5-of-md5s-N` for a multipart upload.
  public var etag: String
  /// `Content-Range` of a ranged GET, e.g. `bytes 0-9/100`.
  public var contentRange: String?
}

/// One entry of a bucket listing.
public struct S3ObjectSummary: Sendable, Equatable {
  public var key: String
  public var size: Int64
  public var etag: String
  /// When the object was stored (gc keeps strays younger than its grace period); nil when the
  /// store's answer had no readable `LastModified`.
  public var lastModified: Date? = nil
}

/// One page of ListObjectsV2.
public struct S3ListPage: Sendable, Equatable {
  public var objects: [S3ObjectSummary]
  /// Pass to the next call; nil on the last page.
  public var continuationToken: String?
}

/// An uploaded part of a multipart upload: what CompleteMultipartUpload needs.
public struct S3Part: Sendable, Equatable {
  public var number: Int
  public var etag: String
  public var size: Int64

  public init(number: Int, etag: String, size: Int64) {
    self.number = number
    self.etag = etag
    self.size = size
  }
}

extension String {
  /// S3 quotes ETags; callers compare them bare.
  var unquoted: String {
    count >= 2 && hasPrefix("\"") && hasSuffix("\"") ? String(dropFirst().dropLast()) : self
  }
}
