import Foundation
import LarderCrypto

/// A stored file: immutable content (by SHA-256) plus what was known when it was uploaded.
///
/// A `File` is a value: keep it in your models, pass it between tasks, encode it. The bytes
/// live once in the blob store however many files share them.
public struct File: Codable, Sendable, Hashable, Identifiable {
  public let id: String
  /// Lower-case hex SHA-256 of the content.
  public let sha256: String
  public let size: Int64
  /// Lower-case hex MD5 of the content (Firebase's `md5Hash` is its base64 form); empty while
  /// not known yet (large content is hashed after its commit, see ``MD5Backfill``;
  /// ``FileStore/withMD5(_:)`` computes it at once).
  public let md5: String
  /// The type libmagic found in the content: the truth the rest of Larder uses.
  public let contentType: String
  /// The type the uploader claimed, kept for reference only.
  public let declaredContentType: String?
  public let filename: String?
  public let createdAt: Date
  /// CRC-32C (Castagnoli) of the content, as GCS reports `crc32c`; nil while not known yet
  /// (hashed after the commit with the MD5; ``FileStore/withChecksums(_:)`` computes it at once).
  public var crc32c: UInt32? = nil

  public init(
    id: String, sha256: String, size: Int64, md5: String, contentType: String,
    declaredContentType: String?, filename: String?, createdAt: Date, crc32c: UInt32? = nil
  ) {
    self.crc32c = crc32c
    self.id = id
    self.sha256 = sha256
    self.size = size
    self.md5 = md5
    self.contentType = contentType
    self.declaredContentType = declaredContentType
    self.filename = filename
    self.createdAt = createdAt
  }

  /// Base64 of the MD5 digest, as Firebase reports it; empty while not known.
  public var md5Base64: String {
    Data(Hex.decode(md5) ?? []).base64EncodedString()
  }
}

extension File {
  /// Reads the ``columns`` of a `files` row.
  init(row: Row) {
    self.init(
      id: row.string("file_id") ?? "",
      sha256: row.bytes("file_sha256").map { Hex.encode($0) } ?? "",
      size: row.int("file_size") ?? 0,
      md5: row.bytes("file_md5").map { Hex.encode($0) } ?? "",
      contentType: row.string("file_content_type") ?? "application/octet-stream",
      declaredContentType: row.string("file_declared_content_type"),
      filename: row.string("file_filename"),
      createdAt: row.date("file_created_at") ?? Date(timeIntervalSince1970: 0),
      crc32c: row.int("file_crc32c").map { UInt32(truncatingIfNeeded: $0) })
  }

  /// The columns ``init(row:)`` reads, from a `files` table aliased `f`; the MD5 is the blob's
  /// (`files.md5` is only what was known at upload). Aliased, because joined
  /// with `objects` the bare names collide (`content_type`, `created_at`) and the object's would win.
  static let columns = """
    f.id AS file_id, f.blob_sha256 AS file_sha256, f.size AS file_size, (SELECT b.md5 FROM blobs b WHERE b.sha256 = f.blob_sha256) AS file_md5, \
    (SELECT b.crc32c FROM blobs b WHERE b.sha256 = f.blob_sha256) AS file_crc32c, \
    f.filename AS file_filename, f.content_type AS file_content_type, \
    f.declared_content_type AS file_declared_content_type, f.created_at AS file_created_at
    """
}

