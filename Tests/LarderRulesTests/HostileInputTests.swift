import Foundation
import LarderRules
import Testing

/// Hostile rules and requests finish promptly with a diagnostic or a denial, never a crash.
struct HostileInputTests {
  static func wrap(_ condition: String) -> String {
    "service firebase.storage {\n  match /b/{bucket}/o/{all=**} {\n    allow read: if \(condition);\n  }\n}\n"
  }

  static func diagnostic(_ source: String) -> Diagnostic? {
    do {
      _ = try RuleSet.parse(source)
      return nil
    } catch {
      return error.diagnostics.first
    }
  }

  @Test func tenThousandNestedParensAreRejected() {
    let condition = String(repeating: "(", count: 10_000) + "true" + String(repeating: ")", count: 10_000)
    let d = Self.diagnostic(Self.wrap(condition))
    #expect(d?.message == "expression nested too deeply (limit 128)")
    #expect(d?.line == 3)
  }

  @Test func tenThousandNegationsAreRejected() {
    let d = Self.diagnostic(Self.wrap(String(repeating: "!", count: 10_000) + "true"))
    #expect(d?.message == "expression nested too deeply (limit 128)")
  }

  @Test func longOperatorChainsAreRejected() {
    let condition = Array(repeating: "true", count: 10_000).joined(separator: " || ")
    let d = Self.diagnostic(Self.wrap(condition))
    #expect(d?.message == "expression nested too deeply (limit 128)")
  }

  @Test func deeplyNestedListsAndMatchesAreRejected() {
    let lists = Self.diagnostic(Self.wrap(String(repeating: "[", count: 10_000)))
    #expect(lists?.message == "expression nested too deeply (limit 128)")
    let matches = Self.diagnostic(
      "service firebase.storage {" + String(repeating: " match /a {", count: 1_000))
    #expect(matches?.message == "match blocks nested deeper than 32")
  }

  @Test func megabyteStringLiteralParsesAndDenies() throws {
    let big = String(repeating: "x", count: 1 << 20)
    let rules = try RuleSet.parse(Self.wrap("request.auth.uid == '\(big)' || '\(big)'.size() == 1"))
    let decision = rules.evaluate(
      RuleRequest(operation: .get, bucket: "b", objectName: "f", auth: RuleAuth(uid: "u")))
    #expect(decision.allowed == false)
    let sized = try RuleSet.parse(Self.wrap("'\(big)'.size() == 1048576"))
    #expect(sized.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: "f")).allowed == true)
  }

  @Test func pathologicalRegexRunsInLinearTime() throws {
    let rules = try RuleSet.parse(
      Self.wrap("resource.metadata.s.matches('(a+)+$') || resource.metadata.s.matches('(a|aa)+b')"))
    let hostile = String(repeating: "a", count: 100_000) + "!"
    var request = RuleRequest(operation: .get, bucket: "b", objectName: "f")
    request.resource = RuleResource(
      name: "f", bucket: "b", size: 1, contentType: "text/plain", metadata: ["s": hostile])
    #expect(rules.evaluate(request).allowed == false)
    request.resource?.metadata["s"] = String(repeating: "a", count: 100_000)
    #expect(rules.evaluate(request).allowed == true)
  }

  @Test func splittingAHugeStringIsBounded() throws {
    let big = String(repeating: "a,", count: 300_000)
    let rules = try RuleSet.parse(Self.wrap("'\(big)'.split(',').size() == 100001"))
    // The split stops at the collection limit of 100 000 separators.
    #expect(rules.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: "f")).allowed == true)
  }

  @Test func fourKilobytePathWithAThousandSegments() throws {
    let name = Array(repeating: "abc", count: 1_000).joined(separator: "/")
    #expect(name.utf8.count == 3_999)
    let counting = try RuleSet.parse(
      "rules_version = '2'; service firebase.storage { match /b/{bucket}/o/{all=**} { allow get: if all.size() == 1000; } }"
    )
    #expect(counting.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: name)).allowed == true)
    let example = try RuleSet.parse(String(contentsOf: ExampleRulesTests.exampleURL, encoding: .utf8))
    let decision = example.evaluate(
      RuleRequest(operation: .get, bucket: "b", objectName: name, auth: RuleAuth(uid: "abc")))
    #expect(decision.allowed == false)
    #expect(decision.reason == "no allow rule for 'get' matches /b/b/o/" + String(name.prefix(193)) + "…")
  }

  @Test func oversizedPathsAreDeniedBeforeMatching() throws {
    let rules = try RuleSet.parse(Self.wrap("true"))
    let deep = String(repeating: "a/", count: 5_000) + "a"
    let deepDecision = rules.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: deep))
    #expect(deepDecision.allowed == false)
    #expect(deepDecision.reason == "object name longer than 8192 bytes")
    let many = String(repeating: "/", count: 2_000)
    let manyDecision = rules.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: "x" + many + "x"))
    #expect(manyDecision.allowed == false)
    #expect(manyDecision.reason == "object name has more than 1024 segments")
  }

  @Test func hugeListLiteralsCostSteps() throws {
    let items = (0..<20_000).map(String.init).joined(separator: ",")
    let rules = try RuleSet.parse(Self.wrap("19999 in [\(items)]"))
    let decision = rules.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: "f"))
    #expect(decision.allowed == false)
    #expect(decision.reason.hasSuffix("evaluation exceeded 10000 steps"))
  }

  @Test func deepExpressionsInDeepRecursionHitTheDepthLimit() throws {
    // 100 negations per call times 20 calls would nest 2 000 evaluator frames; the cap is 1 000.
    let nots = String(repeating: "!", count: 100)
    let rules = try RuleSet.parse(
      """
      service firebase.storage { match /b/{b}/o/{f} {
        function f(n) { return n == 0 ? true : \(nots)f(n - 1); }
        allow get: if f(19);
      } }
      """)
    let decision = rules.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: "x"))
    #expect(decision.allowed == false)
    #expect(decision.reason.hasSuffix("evaluation nested too deeply"))
  }

  @Test func garbageBytesGiveADiagnostic() {
    let garbage = String(decoding: (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }, as: UTF8.self)
    let d = Self.diagnostic(garbage)
    #expect(d?.line == 1)
    #expect(d?.column == 1)
  }

  static func decide(_ condition: String) throws -> RuleDecision {
    try RuleSet.parse(wrap(condition)).evaluate(RuleRequest(operation: .get, bucket: "b", objectName: "f"))
  }

  @Test func hugeEpochMillisAreOutOfRange() throws {
    for millis in ["9223372036854775807", "-9223372036854775807", "253402300800000", "-62135596800001"] {
      let decision = try Self.decide("timestamp.value(\(millis)).toMillis() > 0")
      #expect(decision.allowed == false)
      #expect(decision.reason.hasSuffix("timestamp out of range"), "\(millis): \(decision.reason)")
    }
    // The edges of years 1 and 9999 are still timestamps.
    let edges = try Self.decide(
      "timestamp.value(253402300799999).year() == 9999 && timestamp.value(-62135596800000).year() == 1"
        + " && timestamp.value(253402300799999).toMillis() == 253402300799999")
    #expect(edges.allowed == true)
  }

  @Test func mixedSignDurationPartsThatOverflowAreOutOfRange() throws {
    let decision = try Self.decide("duration.time(2562048, 0, 0, -9000000000000000000) > duration.value(0, 's')")
    #expect(decision.allowed == false)
    #expect(decision.reason.hasSuffix("duration out of range"), "\(decision.reason)")
    let huge = try Self.decide("duration.time(9223372036854775807, 0, 0, 0) > duration.value(0, 's')")
    #expect(huge.reason.hasSuffix("duration out of range"))
    let fine = try Self.decide("duration.time(2562047, 0, 0, -9000000000000000000) == duration.time(2562047, 0, 0, -9000000000000000000)"
      + " && duration.time(1, -60, 0, 5) == duration.value(5, 'ns')")
    #expect(fine.allowed == true)
  }
}
