import Foundation
import Larder
import LarderAuth

/// Who is asking: the verified subject of a bearer token.
public struct Identity: Sendable, Equatable {
  public var uid: String
  public var claims: [String: JSONValue]
  /// The `client_email` of a service account, when a service-account access token (and only
  /// that: ``ServiceAccountAuthenticator``) authenticated the request. Such a caller is an
  /// admin identity: ``AdminIdentityPolicy`` allows it everything, as Firebase's Admin SDK.
  public var serviceAccount: String?
  /// What a service account's token was granted (its OAuth scope): only `fullControl` is the
  /// admin identity; `readWrite` passes every object operation, `readOnly` reads only.
  public var serviceAccountScope: ServiceAccountScope
  public init(
    uid: String, claims: [String: JSONValue] = [:], serviceAccount: String? = nil,
    serviceAccountScope: ServiceAccountScope = .fullControl
  ) {
    self.uid = uid
    self.claims = claims
    self.serviceAccount = serviceAccount
    self.serviceAccountScope = serviceAccountScope
  }

  /// A service account whose token grants the admin identity (`full_control`, `cloud-platform`).
  public var isAdmin: Bool { serviceAccount != nil && serviceAccountScope == .fullControl }
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
  /// The type found in the bytes (`request.resource.detectedContentType`); the declared type
  /// when not given.
  public var detectedContentType: String
  public var metadata: [String: String]
  public var md5Hash: String
  public var sha256: String?
  public var timeCreated: Date
  public var updated: Date
  public var generation: Int64
  public var metageneration: Int64
  /// The fields not known yet, whatever their value here: before its body, an incoming
  /// object is only what the client declares (``declared(bucket:name:size:options:)``).
  public var unknownFields: Set<ContentField> = []

  /// The fields only the content tells.
  public enum ContentField: Sendable, CaseIterable {
    case size, md5Hash, sha256, detectedContentType
  }

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

  /// The object a write would create, as known before its body: the name, declared type and
  /// metadata of `options`, and `size` when the client declared one. `md5Hash`, `sha256` and
  /// `detectedContentType` (and an undeclared size) are ``unknownFields``.
  ///
  ///     try service.judgeWrite(.declared(bucket: b, name: n, size: declaredLength, options: options), at: path, identity: id)
  public static func declared(bucket: String, name: String, size: Int64?, options: ObjectWriteOptions)
    -> AccessResource
  {
    var resource = AccessResource(
      bucket: bucket, name: name, size: size ?? 0, contentType: options.contentType,
      metadata: options.metadata)
    resource.unknownFields = [.md5Hash, .sha256, .detectedContentType]
    if size == nil { resource.unknownFields.insert(.size) }
    return resource
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
  /// Not allowed on what is known, but not denied either: the answer depends on
  /// ``AccessResource/unknownFields``, and is given when they are known.
  public var undecided = false
  public static func allow(_ reason: String) -> AccessDecision { .init(allowed: true, reason: reason) }
  public static func deny(_ reason: String) -> AccessDecision { .init(allowed: false, reason: reason) }
  public static func undecided(_ reason: String) -> AccessDecision {
    .init(allowed: false, reason: reason, undecided: true)
  }
}

/// Every request of the REST and tus APIs passes through one policy.
public protocol AccessPolicy: Sendable {
  /// Decides `request`. A write is asked before its body, with the fields only the content
  /// tells unknown (``AccessResource/unknownFields``), where a policy must not deny on them (it
  /// answers undecided, and the write goes on); and again inside the write, with all known,
  /// unless the first answer was an allow of a policy that ``allowsOnlyOnKnownFields``.
  func decide(_ request: AccessRequest) -> AccessDecision
  /// True when decisions may read `md5Hash`: the server then computes an MD5 not known yet
  /// before asking (it is computed after the upload otherwise; see `MD5Backfill`).
  var readsMD5Hash: Bool { get }
  /// True when the policy never allows on what it does not know: an answer that depends on
  /// ``AccessResource/unknownFields`` is undecided, never allowed (the rules' three-valued
  /// evaluation). Its allow before the body is then final, and the write is not asked again
  /// inside (unless the row it judged changed). False by default: every write is asked twice.
  var allowsOnlyOnKnownFields: Bool { get }
}

extension AccessPolicy {
  public var readsMD5Hash: Bool { false }
  public var allowsOnlyOnKnownFields: Bool { false }
}

/// Allows everything: only for `larder serve --allow-all`, which says so loudly.
public struct AllowAllPolicy: AccessPolicy {
  public init() {}
  public func decide(_ request: AccessRequest) -> AccessDecision { .allow("--allow-all") }
  public var allowsOnlyOnKnownFields: Bool { true }
}

/// The one place service accounts bypass the rules: every decision of every endpoint goes
/// through ``ServiceContext/policy``, which is this wrapper around the configured policy. A
/// request authenticated as a service account (``Identity/serviceAccount``) is allowed, as the
/// Admin SDKs are in Firebase; every other request (anonymous, or a user's token) gets `rules`.
public struct AdminIdentityPolicy: AccessPolicy {
  public let rules: any AccessPolicy

  /// Wraps `rules` (once: a wrapper given again is unwrapped first).
  public init(_ rules: any AccessPolicy) {
    self.rules = (rules as? AdminIdentityPolicy)?.rules ?? rules
  }

  public func decide(_ request: AccessRequest) -> AccessDecision {
    if let identity = request.identity, let email = identity.serviceAccount {
      let scope = identity.serviceAccountScope
      let reads = request.operation == .get || request.operation == .list
      guard reads || scope >= .readWrite else {
        return .deny("service account \(email): its token's scope \(scope.name) does not allow \(request.operation.rawValue)")
      }
      return .allow("service account \(email): \(scope == .fullControl ? "admin identity" : scope.name)")
    }
    return rules.decide(request)
  }

  public var readsMD5Hash: Bool { rules.readsMD5Hash }
  public var allowsOnlyOnKnownFields: Bool { rules.allowsOnlyOnKnownFields }
}
