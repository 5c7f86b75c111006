import Foundation

/// A resumable upload as the catalog records it (one `uploads` row).
///
/// An upload grows by appends until its offset reaches its length; a non-partial upload is then
/// published as an object and kept as a *completed* row (offset = length, no bytes) until it
/// expires, so a client whose last answer was lost still finds it finished.
public struct Upload: Sendable, Equatable {
  public let id: String
  public let bucket: String
  /// The object name it will be published under; nil only for partial uploads.
  public let name: String?
  /// The uid of the identity that created it; nil for an anonymous upload.
  public let owner: String?
  /// nil while the length is deferred.
  public let length: Int64?
  public let offset: Int64
  /// `Upload-Metadata` as decoded at creation (keys → UTF-8 values).
  public let metadata: [String: String]
  public let concat: UploadConcat?
  /// A final upload's `Upload-Concat` exactly as its client sent it (tus: HEAD echoes it); nil
  /// for other uploads, and for finals recorded before it was kept (their ids are known).
  public let receivedConcat: String?
  public let expiresAt: Date
  public let createdAt: Date
  /// Set once the object was published.
  public let completedAt: Date?
  /// What the upload's data store recorded with the offset (opaque here).
  let dataState: UploadDataState
  /// This process's count of released appends when the row was read (``UploadStore``): an
  /// append that begins from this row knows it is still current when none was released
  /// since. Not part of the upload's value.
  var readAt: UInt64?

  public var isComplete: Bool { length == offset }
  public var isPartial: Bool { concat == .partial }
  /// Whether this is a final concatenation (its bytes are its partials': nothing is appended).
  public var isFinal: Bool {
    if case .final = concat { return true }
    return false
  }

  init(row: Row) {
    id = row.string("id") ?? ""
    bucket = row.string("bucket") ?? ""
    name = row.string("name")
    owner = row.string("owner")
    length = row.int("length")
    offset = row.int("offset") ?? 0
    // Written only by the store, from a `[String: String]`: unreadable JSON (a hand edit) reads
    // as none rather than making the upload unreachable.
    metadata =
      row.string("metadata").flatMap { try? JSONDecoder().decode([String: String].self, from: Data($0.utf8)) }
      ?? [:]
    let storedConcat = row.string("concat")
    concat = storedConcat.flatMap(UploadConcat.init(stored:))
    receivedConcat = storedConcat.flatMap { $0.hasPrefix("final;") && $0.contains("/") ? $0 : nil }
    expiresAt = row.date("expires_at") ?? Date(timeIntervalSince1970: 0)
    createdAt = row.date("created_at") ?? Date(timeIntervalSince1970: 0)
    completedAt = row.date("completed_at")
    dataState = UploadDataState(stored: row.string("shared_state"))
  }

  init(
    id: String, bucket: String, name: String?, owner: String?, length: Int64?, offset: Int64,
    metadata: [String: String], concat: UploadConcat?, expiresAt: Date, createdAt: Date, completedAt: Date?,
    receivedConcat: String? = nil, dataState: UploadDataState = .none
  ) {
    self.receivedConcat = receivedConcat
    self.dataState = dataState
    self.id = id
    self.bucket = bucket
    self.name = name
    self.owner = owner
    self.length = length
    self.offset = offset
    self.metadata = metadata
    self.concat = concat
    self.expiresAt = expiresAt
    self.createdAt = createdAt
    self.completedAt = completedAt
  }

  /// The same upload with the expiry the catalog recorded for it.
  func expiring(at date: Date) -> Upload {
    Upload(
      id: id, bucket: bucket, name: name, owner: owner, length: length, offset: offset, metadata: metadata,
      concat: concat, expiresAt: date, createdAt: createdAt, completedAt: completedAt, receivedConcat: receivedConcat,
      dataState: dataState)
  }

  /// The same upload with the data store's state as just recorded.
  func with(dataState: UploadDataState) -> Upload {
    Upload(
      id: id, bucket: bucket, name: name, owner: owner, length: length, offset: offset, metadata: metadata,
      concat: concat, expiresAt: expiresAt, createdAt: createdAt, completedAt: completedAt,
      receivedConcat: receivedConcat, dataState: dataState)
  }

  /// The row's value: where it was read from is not part of it.
  public static func == (a: Upload, b: Upload) -> Bool {
    a.id == b.id && a.bucket == b.bucket && a.name == b.name && a.owner == b.owner && a.length == b.length
      && a.offset == b.offset && a.metadata == b.metadata && a.concat == b.concat
      && a.receivedConcat == b.receivedConcat && a.expiresAt == b.expiresAt && a.createdAt == b.createdAt
      && a.completedAt == b.completedAt && a.dataState == b.dataState
  }
}

/// The concatenation role of an upload.
public enum UploadConcat: Sendable, Equatable {
  /// A piece, never published on its own.
  case partial
  /// The concatenation of these partial uploads (their ids), in order.
  case final([String])

  /// `partial`, or `final;` and the partials as ids or, as received, as URLs or paths whose
  /// last segment is the id.
  init?(stored: String) {
    if stored == "partial" {
      self = .partial
    } else if stored.hasPrefix("final;") {
      self = .final(
        stored.dropFirst(6).split(separator: " ").map { String($0.split(separator: "/").last ?? $0) })
    } else {
      return nil
    }
  }

  var stored: String {
    switch self {
    case .partial: "partial"
    case .final(let ids): "final;" + ids.joined(separator: " ")
    }
  }
}
