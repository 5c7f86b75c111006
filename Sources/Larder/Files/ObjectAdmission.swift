/// Decides, inside the write that would publish it, whether an object may become visible.
///
/// The store calls ``admit(_:replacing:)`` in the write transaction, after the content is
/// committed as a file and before the object row is written, with the row it would replace
/// read in that same transaction: what is judged is exactly what is replaced. Simple uploads,
/// finished resumable uploads and concatenations all pass through this one step.
///
/// Contract: it runs while the catalog's write lock is held, so it must be quick and must not
/// touch the store. Throwing refuses the write: the transaction rolls back, the content is not
/// published, and the error reaches the caller unchanged.
/// ```swift
/// struct OnlyImages: ObjectAdmission {
///   func admit(_ incoming: IncomingObject, replacing current: StoredObject?) throws {
///     guard incoming.file.contentType.hasPrefix("image/") else { throw Refused() }
///   }
/// }
/// ```
public protocol ObjectAdmission: Sendable {
  func admit(_ incoming: IncomingObject, replacing current: StoredObject?) throws
  /// True when ``admit(_:replacing:)`` reads the MD5 (`file.md5`) of the incoming or current
  /// content: the store then computes it before the write (MD5 is otherwise not computed on
  /// the upload path for content over ``FileStore/inlineMD5Limit``, and may not be known yet).
  var readsMD5: Bool { get }
}

extension ObjectAdmission {
  public var readsMD5: Bool { false }
}

/// The object a write would publish: its name, declared type, committed content and custom metadata.
public struct IncomingObject: Sendable {
  public var bucket: String
  public var name: String
  /// The type the object will report: what the client declared, else `application/octet-stream`.
  public var contentType: String
  /// The content as committed: size, sha256, md5 (empty unless known or ``ObjectAdmission/readsMD5``)
  /// and the sniffed `contentType` (libmagic's finding).
  public var file: File
  public var metadata: [String: String]
}
