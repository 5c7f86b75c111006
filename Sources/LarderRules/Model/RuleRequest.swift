import Foundation

/// The five storage operations; `read` = get + list and `write` = create + update + delete.
public enum RuleOperation: String, Sendable, CaseIterable {
  case get, list, create, update, delete

  /// Expands a rule method name (`read`, `write` or an operation) to operations.
  public static func expand(_ method: String) -> [RuleOperation]? {
    switch method {
    case "read": [.get, .list]
    case "write": [.create, .update, .delete]
    default: RuleOperation(rawValue: method).map { [$0] }
    }
  }
}

/// The identity behind a request: `request.auth = {uid, token}`.
public struct RuleAuth: Sendable, Equatable {
  public var uid: String
  /// The verified token claims (`request.auth.token`).
  public var token: [String: RuleValue]

  public init(uid: String, token: [String: RuleValue] = [:]) {
    self.uid = uid
    self.token = token
  }
}

/// Object metadata as the rules see it (`resource` and `request.resource`).
public struct RuleResource: Sendable, Equatable {
  public var name: String
  public var bucket: String
  public var size: Int64
  /// The declared type, as in Firebase (`application/octet-stream` when none was declared).
  public var contentType: String
  /// A Larder extension: the type found in the bytes, for rules that must not trust the client
  /// (`null` when unknown). Before a body arrives the server passes the declared type here, and
  /// asks again with the real one before the object becomes visible.
  public var detectedContentType: String?
  public var metadata: [String: String]
  public var md5Hash: String
  public var sha256: String?
  public var timeCreated: Date
  public var updated: Date
  public var generation: Int64
  public var metageneration: Int64

  public init(
    name: String, bucket: String, size: Int64, contentType: String, detectedContentType: String? = nil,
    metadata: [String: String] = [:], md5Hash: String = "", sha256: String? = nil,
    timeCreated: Date = Date(timeIntervalSince1970: 0), updated: Date = Date(timeIntervalSince1970: 0),
    generation: Int64 = 1, metageneration: Int64 = 1
  ) {
    self.name = name
    self.bucket = bucket
    self.size = size
    self.contentType = contentType
    self.detectedContentType = detectedContentType
    self.metadata = metadata
    self.md5Hash = md5Hash
    self.sha256 = sha256
    self.timeCreated = timeCreated
    self.updated = updated
    self.generation = generation
    self.metageneration = metageneration
  }

  /// The map the rules see; `sha256` and `detectedContentType` are `null` when unknown.
  var ruleValue: RuleValue {
    .map([
      "name": .string(name),
      "bucket": .string(bucket),
      "size": .int(size),
      "contentType": .string(contentType),
      "detectedContentType": detectedContentType.map { .string($0) } ?? .null,
      "metadata": .map(metadata.mapValues { .string($0) }),
      "md5Hash": .string(md5Hash),
      "sha256": sha256.map { .string($0) } ?? .null,
      "timeCreated": .timestamp(timeCreated),
      "updated": .timestamp(updated),
      "generation": .int(generation),
      "metageneration": .int(metageneration),
    ])
  }
}

/// One access to check against the rules.
public struct RuleRequest: Sendable, Equatable {
  public var operation: RuleOperation
  public var bucket: String
  /// The full object name, e.g. `users/u1/avatar.png`; for `list`, the prefix
  /// (a trailing `/` is ignored). Matched against `match /b/{bucket}/o/...`.
  public var objectName: String
  /// nil = anonymous (`request.auth == null`).
  public var auth: RuleAuth?
  /// `request.time`.
  public var time: Date
  /// The stored object (`resource`), nil when there is none.
  public var resource: RuleResource?
  /// The incoming object for create/update (`request.resource`).
  public var requestResource: RuleResource?

  public init(
    operation: RuleOperation, bucket: String, objectName: String, auth: RuleAuth? = nil,
    time: Date = Date(), resource: RuleResource? = nil, requestResource: RuleResource? = nil
  ) {
    self.operation = operation
    self.bucket = bucket
    self.objectName = objectName
    self.auth = auth
    self.time = time
    self.resource = resource
    self.requestResource = requestResource
  }
}

/// The outcome of `RuleSet.evaluate`, with enough detail for an access log.
public struct RuleDecision: Sendable, Equatable, CustomStringConvertible {
  public var allowed: Bool
  /// `file:line:col` of the `allow` that granted access (nil when denied).
  public var rule: String?
  /// Why: which rule allowed, or why every candidate failed.
  public var reason: String

  public init(allowed: Bool, rule: String?, reason: String) {
    self.allowed = allowed
    self.rule = rule
    self.reason = reason
  }

  public var description: String { (allowed ? "ALLOW" : "DENY") + ": " + reason }
}
