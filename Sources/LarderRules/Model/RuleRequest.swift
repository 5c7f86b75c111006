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
  /// (`null` when none was given).
  public var detectedContentType: String?
  public var metadata: [String: String]
  public var md5Hash: String
  public var sha256: String?
  public var timeCreated: Date
  public var updated: Date
  public var generation: Int64
  public var metageneration: Int64
  /// The fields not known yet, which read as ``RuleValue/unknown`` whatever their value here:
  /// before a body arrives the server knows what the client declares, not what the bytes are,
  /// and asks again with every field known before the object becomes visible.
  public var unknownFields: Set<Field>

  /// The fields only the content tells.
  public enum Field: Sendable, CaseIterable {
    case size, md5Hash, sha256, detectedContentType
  }

  public init(
    name: String, bucket: String, size: Int64, contentType: String, detectedContentType: String? = nil,
    metadata: [String: String] = [:], md5Hash: String = "", sha256: String? = nil,
    timeCreated: Date = Date(timeIntervalSince1970: 0), updated: Date = Date(timeIntervalSince1970: 0),
    generation: Int64 = 1, metageneration: Int64 = 1, unknownFields: Set<Field> = []
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
    self.unknownFields = unknownFields
  }

  /// The map the rules see; `sha256` and `detectedContentType` are `null` when not given, and
  /// ``unknownFields`` are ``RuleValue/unknown``.
  var ruleValue: RuleValue {
    func known(_ field: Field, _ value: RuleValue) -> RuleValue {
      unknownFields.contains(field) ? .unknown : value
    }
    return .map([
      "name": .string(name),
      "bucket": .string(bucket),
      "size": known(.size, .int(size)),
      "contentType": .string(contentType),
      "detectedContentType": known(.detectedContentType, detectedContentType.map { .string($0) } ?? .null),
      "metadata": .map(metadata.mapValues { .string($0) }),
      "md5Hash": known(.md5Hash, .string(md5Hash)),
      "sha256": known(.sha256, sha256.map { .string($0) } ?? .null),
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
  /// True when access is not granted on what is known, but an `allow` whose condition depends on
  /// a field not known yet (``RuleResource/unknownFields``) might grant it: not denied yet, to be
  /// decided again with every field known. Never true when no field is unknown; `allowed` is
  /// false then, so a caller that does not ask denies.
  public var undecided: Bool
  /// `file:line:col` of the `allow` that granted access, or of the first left undecided (nil when denied).
  public var rule: String?
  /// Why: which rule allowed, or why every candidate failed.
  public var reason: String

  public init(allowed: Bool, undecided: Bool = false, rule: String?, reason: String) {
    self.allowed = allowed
    self.undecided = undecided && !allowed
    self.rule = rule
    self.reason = reason
  }

  public var description: String { (allowed ? "ALLOW" : undecided ? "UNDECIDED" : "DENY") + ": " + reason }
}
