import Foundation
import Larder
import LarderAuth

/// Who is asking: the verified subject of a bearer token.
public struct Identity: Sendable, Equatable {
  public var uid: String
  public var claims: [String: JSONValue]
  public init(uid: String, claims: [String: JSONValue] = [:]) {
    self.uid = uid
    self.claims = claims
  }
}

/// The storage operation a request performs, in the rules language's terms.
public enum AccessOperation: String, Sendable, CaseIterable {
  case get, list, create, update, delete
}

/// An object as the policy sees it: the stored one (`resource`) or the incoming one.
public struct AccessResource: Sendable, Equatable {
  public var bucket: String
  public var name: String
  public var size: Int64
  /// The declared type (`request.resource.contentType`, as in Firebase).
  public var contentType: String
  /// The type found in the bytes (`request.resource.detectedContentType`); before a body has
  /// arrived (or when not given), the declared type, the only one known yet.
  public var detectedContentType: String
  public var metadata: [String: String]
  public var md5Hash: String
  public var sha256: String?
  public var timeCreated: Date
  public var updated: Date
  public var generation: Int64
  public var metageneration: Int64

  public init(
    bucket: String, name: String, size: Int64, contentType: String, detectedContentType: String? = nil,
    metadata: [String: String] = [:], md5Hash: String = "", sha256: String? = nil, timeCreated: Date = Date(),
    updated: Date = Date(), generation: Int64 = 0, metageneration: Int64 = 0
  ) {
    self.bucket = bucket
    self.name = name
    self.size = size
    self.contentType = contentType
    self.detectedContentType = detectedContentType ?? contentType
    self.metadata = metadata
    self.md5Hash = md5Hash
    self.sha256 = sha256
    self.timeCreated = timeCreated
    self.updated = updated
    self.generation = generation
    self.metageneration = metageneration
  }

  /// The object a write of new content would create, as the policy sees it: its declared type
  /// from `options`, and `detectedContentType` once the bytes are known (the declared type before).
  ///
  ///     try context.authorizeWrite(.incoming(bucket: b, name: n, size: declaredLength, options: options), identity: id)
  public static func incoming(
    bucket: String, name: String, size: Int64, options: ObjectWriteOptions, detectedContentType: String? = nil,
    md5Hash: String = "", sha256: String? = nil
  ) -> AccessResource {
    AccessResource(
      bucket: bucket, name: name, size: size, contentType: options.contentType,
      detectedContentType: detectedContentType, metadata: options.metadata, md5Hash: md5Hash,
      sha256: sha256)
  }

  public init(_ object: StoredObject) {
    self.init(
      bucket: object.bucket, name: object.name, size: object.file.size, contentType: object.contentType,
      detectedContentType: object.detectedContentType, metadata: object.metadata, md5Hash: object.file.md5Base64,
      sha256: object.file.sha256,
      timeCreated: object.timeCreated, updated: object.updated, generation: object.generation,
      metageneration: object.metageneration)
  }
}

/// One access decision's inputs.
public struct AccessRequest: Sendable {
  public var operation: AccessOperation
  public var bucket: String
  /// The object's name; for `list`, the prefix being listed.
  public var name: String
  public var identity: Identity?
  /// The stored object, when there is one.
  public var resource: AccessResource?
  /// The object as it would be after the write (`create`, `update`).
  public var incoming: AccessResource?
  public var time: Date

  public init(
    operation: AccessOperation, bucket: String, name: String, identity: Identity?, resource: AccessResource? = nil,
    incoming: AccessResource? = nil, time: Date = Date()
  ) {
    self.operation = operation
    self.bucket = bucket
    self.name = name
    self.identity = identity
    self.resource = resource
    self.incoming = incoming
    self.time = time
  }
}

public struct AccessDecision: Sendable, Equatable {
  public var allowed: Bool
  /// Why, for the log (never sent to the client beyond "permission denied").
  public var reason: String
  public static func allow(_ reason: String) -> AccessDecision { .init(allowed: true, reason: reason) }
  public static func deny(_ reason: String) -> AccessDecision { .init(allowed: false, reason: reason) }
}

/// Every request of the REST and tus APIs passes through one policy.
public protocol AccessPolicy: Sendable {
  func decide(_ request: AccessRequest) -> AccessDecision
  /// True when decisions may read `md5Hash`: the server then computes an MD5 not known yet
  /// before asking (it is computed after the upload otherwise; see `MD5Backfill`).
  var readsMD5Hash: Bool { get }
}

extension AccessPolicy {
  public var readsMD5Hash: Bool { false }
}

/// Allows everything: only for `larder serve --allow-all`, which says so loudly.
public struct AllowAllPolicy: AccessPolicy {
  public init() {}
  public func decide(_ request: AccessRequest) -> AccessDecision { .allow("--allow-all") }
}
