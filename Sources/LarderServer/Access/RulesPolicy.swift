import Foundation
import LarderAuth
import LarderRules
import Synchronization

/// The access policy of a `storage.rules` file: default deny, reloadable.
///
/// ```swift
/// let policy = try RulesPolicy(file: URL(fileURLWithPath: "storage.rules"))
/// policy.reload()   // on SIGHUP; a broken file keeps the old rules
/// ```
public final class RulesPolicy: AccessPolicy {
  public let file: URL?
  private let rules: Mutex<RuleSet>
  /// Whether the rules' text mentions `md5Hash` (then MD5s not known yet are computed first).
  private let mentionsMD5 = Mutex(false)
  public var readsMD5Hash: Bool { mentionsMD5.withLock { $0 } }
  /// The evaluation is three-valued: what depends on an unknown field is undecided.
  public var allowsOnlyOnKnownFields: Bool { true }

  /// Loads and parses the rules file.
  /// - Throws: ``RulesDiagnostics`` with `file:line:col` messages, or a read error.
  public init(file: URL) throws {
    self.file = file
    let source = try String(contentsOf: file, encoding: .utf8)
    rules = Mutex(try RuleSet.parse(source, fileName: file.path))
    mentionsMD5.withLock { $0 = source.contains("md5Hash") }
  }

  /// Re-reads the file; returns nil on success, else the diagnostics (the old rules stay).
  @discardableResult
  public func reload() -> String? {
    guard let file else { return nil }
    do {
      let source = try String(contentsOf: file, encoding: .utf8)
      let parsed = try RuleSet.parse(source, fileName: file.path)
      rules.withLock { $0 = parsed }
      mentionsMD5.withLock { $0 = source.contains("md5Hash") }
      return nil
    } catch {
      return "\(error)"
    }
  }

  public func decide(_ request: AccessRequest) -> AccessDecision {
    let ruleSet = rules.withLock { $0 }
    let decision = ruleSet.evaluate(
      RuleRequest(
        operation: Self.ruleOperation(request.operation),
        bucket: request.bucket, objectName: request.name,
        auth: request.identity.map { RuleAuth(uid: $0.uid, token: $0.claims.mapValues(Self.ruleValue)) },
        time: request.time, resource: request.resource.map(Self.ruleResource),
        requestResource: request.incoming.map(Self.ruleResource)))
    return AccessDecision(
      allowed: decision.allowed, reason: decision.description, undecided: decision.undecided)
  }

  /// A switch, not a raw-value lookup, so a new operation on either side fails to compile.
  static func ruleOperation(_ operation: AccessOperation) -> RuleOperation {
    switch operation {
    case .get: .get
    case .list: .list
    case .create: .create
    case .update: .update
    case .delete: .delete
    }
  }

  static func ruleResource(_ r: AccessResource) -> RuleResource {
    RuleResource(
      name: r.name, bucket: r.bucket, size: r.size, contentType: r.contentType,
      detectedContentType: r.detectedContentType, metadata: r.metadata,
      md5Hash: r.md5Hash, sha256: r.sha256, timeCreated: r.timeCreated, updated: r.updated,
      generation: r.generation, metageneration: r.metageneration,
      unknownFields: Set(r.unknownFields.map(ruleField)))
  }

  /// A switch, not a name lookup, so a new field on either side fails to compile.
  static func ruleField(_ field: AccessResource.ContentField) -> RuleResource.Field {
    switch field {
    case .size: .size
    case .md5Hash: .md5Hash
    case .sha256: .sha256
    case .detectedContentType: .detectedContentType
    }
  }

  static func ruleValue(_ json: JSONValue) -> RuleValue {
    switch json {
    case .null: .null
    case .bool(let b): .bool(b)
    case .int(let i): .int(i)
    case .double(let d): .float(d)
    case .string(let s): .string(s)
    case .array(let a): .list(a.map(ruleValue))
    case .object(let o): .map(o.mapValues(ruleValue))
    }
  }
}
