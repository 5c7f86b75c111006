import Foundation

/// A parsed `storage.rules` file, ready to answer access questions.
///
///     let rules = try RuleSet.parse(source, fileName: "storage.rules")
///     let decision = rules.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: "public/a.txt"))
///     if decision.allowed { … } else { log(decision.reason) }
///
/// Immutable and `Sendable`: parse once (or on SIGHUP) and share it across request threads.
public struct RuleSet: Sendable {
  /// `rules_version`: 1 or 2 (in 2, `{x=**}` also matches zero segments).
  public let version: Int
  public let fileName: String
  let root: MatchBlock

  /// Parses rules source.
  /// - Throws: `RulesDiagnostics` with `file:line:col`, a message and a caret snippet.
  public static func parse(_ source: String, fileName: String = "storage.rules") throws(RulesDiagnostics)
    -> RuleSet
  {
    let bytes = Array(source.utf8)
    do {
      var parser = try Parser(source: bytes, fileName: fileName)
      let file = try parser.parseFile()
      return RuleSet(version: file.version, fileName: fileName, root: file.root)
    } catch {
      throw RulesDiagnostics([Diagnostic.at(error.location, error.message, fileName: fileName, source: bytes)]
      )
    }
  }

  /// Decides one request: allowed iff any `allow` for its operation, in a `match` whose path
  /// matches, has a condition that evaluates to `true`. Default deny; runtime errors deny.
  /// When fields of `request.resource` are unknown (``RuleResource/unknownFields``), a condition
  /// may evaluate to unknown: if no other allows, the decision is ``RuleDecision/undecided``.
  public func evaluate(_ request: RuleRequest) -> RuleDecision {
    var name = Substring(request.objectName)
    if name.hasSuffix("/") { name = name.dropLast() }
    let fullPath = "/b/\(request.bucket)/o/\(name)"
    guard name.utf8.count <= EvaluationLimits.maxObjectNameBytes, request.bucket.utf8.count <= 1024 else {
      return RuleDecision(
        allowed: false, rule: nil,
        reason: "object name longer than \(EvaluationLimits.maxObjectNameBytes) bytes")
    }
    let objectSegments =
      name.isEmpty ? [] : name.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    guard objectSegments.count <= EvaluationLimits.maxPathSegments else {
      return RuleDecision(
        allowed: false, rule: nil,
        reason: "object name has more than \(EvaluationLimits.maxPathSegments) segments")
    }
    let path = ["b", request.bucket, "o"] + objectSegments
    let shownPath = fullPath.count > 200 ? String(fullPath.prefix(200)) + "…" : fullPath

    var candidates: [(AllowRule, Scope)] = []
    let rootScope = Scope(parent: nil, variables: [:], functions: root.functions)
    for child in root.children {
      collect(child, path[...], rootScope, request.operation, &candidates)
    }
    guard !candidates.isEmpty else {
      return RuleDecision(
        allowed: false, rule: nil,
        reason: "no allow rule for '\(request.operation.rawValue)' matches \(shownPath)")
    }

    let evaluator = Evaluator(globals: globals(for: request, path: path))
    var failures: [String] = []
    // The first allow whose condition depends on a field not known yet.
    var undecided: String?
    for (rule, scope) in candidates {
      guard let condition = rule.condition else {
        return RuleDecision(
          allowed: true, rule: rule.origin, reason: "allowed by \(rule.origin) (unconditional)")
      }
      do {
        switch try evaluator.condition(condition, scope: scope) {
        case true?:
          return RuleDecision(allowed: true, rule: rule.origin, reason: "allowed by \(rule.origin)")
        case false?:
          failures.append("\(rule.origin): false")
        case nil:
          undecided = undecided ?? rule.origin
          failures.append("\(rule.origin): unknown (needs a field not known yet)")
        }
      } catch {
        failures.append(
          "\(rule.origin): error at \(fileName):\(error.location.line):\(error.location.column): \(error.message)"
        )
        // The budget is the request's: what is left undecided stays denied.
        if error.exhausted {
          undecided = nil
          break
        }
      }
    }
    if let undecided {
      return RuleDecision(
        allowed: false, undecided: true, rule: undecided,
        reason: "'\(request.operation.rawValue)' on \(shownPath) not decided yet: "
          + failures.joined(separator: "; "))
    }
    return RuleDecision(
      allowed: false, rule: nil,
      reason: "denied '\(request.operation.rawValue)' on \(shownPath): " + failures.joined(separator: "; "))
  }

  /// Appends the allows of `block` (and its descendants) that match `remaining` exactly.
  private func collect(
    _ block: MatchBlock, _ remaining: ArraySlice<String>, _ parent: Scope, _ operation: RuleOperation,
    _ out: inout [(AllowRule, Scope)]
  ) {
    var variables: [String: RuleValue] = [:]
    var i = remaining.startIndex
    for segment in block.pattern {
      switch segment {
      case .literal(let text):
        // Bytes, not Swift's canonical equivalence: "K" is not the Kelvin sign here, as in Firebase.
        guard i < remaining.endIndex, remaining[i].utf8.elementsEqual(text.utf8) else { return }
        i += 1
      case .variable(let name):
        guard i < remaining.endIndex else { return }
        variables[name] = .string(remaining[i])
        i += 1
      case .recursive(let name):
        // v1: one or more segments; v2: zero or more.
        if version < 2 && i == remaining.endIndex { return }
        variables[name] = .path(Array(remaining[i...]))
        i = remaining.endIndex
      }
    }
    let rest = remaining[i...]
    let scope = Scope(parent: parent, variables: variables, functions: block.functions)
    if rest.isEmpty {
      for rule in block.allows where rule.operations.contains(operation) { out.append((rule, scope)) }
    }
    for child in block.children { collect(child, rest, scope, operation, &out) }
  }

  private func globals(for request: RuleRequest, path: [String]) -> [String: RuleValue] {
    let auth: RuleValue =
      request.auth.map { .map(["uid": .string($0.uid), "token": .map($0.token)]) } ?? .null
    return [
      "request": .map([
        "auth": auth,
        "path": .path(path),
        "time": .timestamp(request.time),
        "resource": request.requestResource?.ruleValue ?? .null,
        "method": .string(request.operation.rawValue),
      ]),
      "resource": request.resource?.ruleValue ?? .null,
    ]
  }
}
