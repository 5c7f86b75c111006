import Foundation
import LarderRules
import Testing

/// What a decision is when fields of `request.resource` are not known yet.
enum Outcome: Sendable {
  case allowed, denied, undecided
}

/// One condition evaluated as `allow create` on `users/alice/photo.png` before the body: the
/// declared size (1000) and type (`image/png`) are known, `md5Hash`, `sha256` and
/// `detectedContentType` are not (and, with `sizeKnown` false, neither is the size).
struct UnknownFieldCase: Sendable, CustomTestStringConvertible {
  var condition: String
  var outcome: Outcome
  var sizeKnown = true
  var testDescription: String { "\(condition) -> \(outcome)\(sizeKnown ? "" : " (size unknown)")" }

  init(_ condition: String, _ outcome: Outcome, sizeKnown: Bool = true) {
    self.condition = condition
    self.outcome = outcome
    self.sizeKnown = sizeKnown
  }
}

/// Three-valued evaluation: a field not known yet reads as unknown, which propagates through
/// operators and functions, with Kleene's `||`/`&&`; a condition that ends up unknown leaves the
/// request undecided, never denied.
struct UnknownFieldTests {
  static let md5 = "request.resource.md5Hash"
  static let cases: [UnknownFieldCase] = [
    // comparisons
    .init("\(md5) == 'x'", .undecided),
    .init("\(md5) != ''", .undecided),
    .init("\(md5) < 'm'", .undecided),
    .init("request.resource.sha256 == null", .undecided),
    .init("request.resource.detectedContentType == request.resource.contentType", .undecided),
    .init("request.resource.size < 100", .denied),
    .init("request.resource.size < 2000", .allowed),
    .init("request.resource.size < 100", .undecided, sizeKnown: false),
    .init("request.resource.size + 1 > 100", .undecided, sizeKnown: false),
    .init("-request.resource.size < 0", .undecided, sizeKnown: false),
    .init("request.resource.contentType == 'image/png'", .allowed),
    .init("request.resource.contentType == 'text/plain'", .denied),
    // lists and maps holding an unknown are unequal as soon as a known part differs
    .init("[\(md5)] == ['x']", .undecided),
    .init("[\(md5), 1] == ['x', 2]", .denied),
    .init("[\(md5), 1] == ['x']", .denied),
    .init("{'a': \(md5)} == {'a': 'x'}", .undecided),
    .init("{'a': \(md5)} == {'b': 'x'}", .denied),
    // in
    .init("\(md5) in ['a', 'b']", .undecided),
    .init("\(md5) in []", .denied),
    .init("'a' in [\(md5)]", .undecided),
    .init("'b' in ['b', \(md5)]", .allowed),
    .init("\(md5) in {'a': 1}", .undecided),
    .init("'md5Hash' in request.resource", .allowed),
    .init("['a', \(md5)].hasAll(['a'])", .allowed),
    .init("['a', \(md5)].hasAny(['b'])", .undecided),
    .init("['a'].hasAny([\(md5)])", .undecided),
    .init("['a'].hasAll(['a', 'c'])", .denied),
    .init("[\(md5), 'a'].toSet().size() == 2", .undecided),
    // string methods and indexing
    .init("\(md5).size() == 24", .undecided),
    .init("\(md5).lower() == 'x'", .undecided),
    .init("\(md5)[0] == 'a'", .undecided),
    .init("\(md5) + 'x' == 'y'", .undecided),
    .init("request.resource.detectedContentType.matches('image/.*')", .undecided),
    .init("request.resource.contentType.matches(request.resource.detectedContentType)", .undecided),
    .init("'abc'.split(\(md5)).size() == 1", .undecided),
    .init("[\(md5)].join('') == ''", .undecided),
    .init("request.resource.metadata.get(\(md5), 'd') == 'd'", .undecided),
    .init("\(md5) is string", .undecided),
    .init("(\(md5) == 'x' ? 1 : 2) == 1", .undecided),
    // functions: built-in and the file's own
    .init("int(\(md5)) == 1", .undecided),
    .init("string(request.resource.size) == '1000'", .allowed),
    .init("math.abs(request.resource.size) > 10", .undecided, sizeKnown: false),
    .init("math.max([1, request.resource.size]) == 1", .undecided, sizeKnown: false),
    .init("isPNG(request.resource.detectedContentType)", .undecided),
    .init("isPNG(request.resource.contentType)", .allowed),
    .init("isPNG('text/plain')", .denied),
    // ! and Kleene's || and &&, short-circuiting from either side
    .init("!(\(md5) == 'x')", .undecided),
    .init("true || \(md5) == 'x'", .allowed),
    .init("\(md5) == 'x' || true", .allowed),
    .init("false && \(md5) == 'x'", .denied),
    .init("\(md5) == 'x' && false", .denied),
    .init("\(md5) == 'x' || false", .undecided),
    .init("false || \(md5) == 'x'", .undecided),
    .init("\(md5) == 'x' && true", .undecided),
    .init("true && \(md5) == 'x'", .undecided),
    .init("request.resource.size < 100 || \(md5) != ''", .undecided),
    .init("request.resource.size < 100 && \(md5) != ''", .denied),
    // with errors: `error || unknown` may be true, `error && unknown` never is
    .init("request.auth.token.missing || \(md5) == 'x'", .undecided),
    .init("\(md5) == 'x' || request.auth.token.missing", .undecided),
    .init("request.auth.token.missing && \(md5) == 'x'", .denied),
    .init("\(md5) == 'x' && request.auth.token.missing", .denied),
  ]

  static func rules(_ condition: String) -> String {
    """
    rules_version = '2';
    service firebase.storage {
      match /b/{bucket}/o {
        function isPNG(type) { return type == 'image/png'; }
        match /users/{uid}/{file} {
          allow create: if \(condition);
        }
      }
    }
    """
  }

  /// `users/alice/photo.png` as known before its body.
  static func declared(sizeKnown: Bool = true) -> RuleResource {
    var unknown: Set<RuleResource.Field> = [.md5Hash, .sha256, .detectedContentType]
    if !sizeKnown { unknown.insert(.size) }
    return RuleResource(
      name: "users/alice/photo.png", bucket: "bkt", size: 1000, contentType: "image/png",
      detectedContentType: "image/png", metadata: ["owner": "alice"], md5Hash: "", unknownFields: unknown)
  }

  static func create(_ incoming: RuleResource) -> RuleRequest {
    RuleRequest(
      operation: .create, bucket: "bkt", objectName: "users/alice/photo.png", auth: Fixtures.alice,
      time: Fixtures.now, requestResource: incoming)
  }

  @Test(arguments: cases)
  func unknownFieldsPropagate(_ c: UnknownFieldCase) throws {
    let decision = try RuleSet.parse(Self.rules(c.condition)).evaluate(
      Self.create(Self.declared(sizeKnown: c.sizeKnown)))
    let outcome: Outcome = decision.allowed ? .allowed : decision.undecided ? .undecided : .denied
    #expect(outcome == c.outcome, "\(decision.reason)")
    #expect(!(decision.allowed && decision.undecided))
  }

  @Test func anUndecidedAllowIsNamedAndAnotherThatAllowsWins() throws {
    let source = """
      rules_version = '2';
      service firebase.storage {
        match /b/{bucket}/o {
          match /users/{uid}/{file} {
            allow create: if request.resource.size > 5000;
            allow create: if request.resource.md5Hash == 'x';
            allow create: if request.resource.metadata.owner == 'bob';
          }
        }
      }
      """
    let undecided = try RuleSet.parse(source).evaluate(Self.create(Self.declared()))
    #expect(!undecided.allowed)
    #expect(undecided.undecided)
    #expect(undecided.rule == "storage.rules:6:7")
    #expect(undecided.description.hasPrefix("UNDECIDED: "))

    var byBob = Self.declared()
    byBob.metadata["owner"] = "bob"
    let allowed = try RuleSet.parse(source).evaluate(Self.create(byBob))
    #expect(allowed.allowed && !allowed.undecided)
    #expect(allowed.rule == "storage.rules:7:7")
  }

  /// With every field known (the check at publish) the same conditions are two-valued.
  @Test func nothingIsUndecidedOnceEveryFieldIsKnown() throws {
    var known = Self.declared(sizeKnown: false)
    known.unknownFields = []
    known.md5Hash = "x"
    for c in Self.cases {
      let decision = try RuleSet.parse(Self.rules(c.condition)).evaluate(Self.create(known))
      #expect(!decision.undecided, "\(c.condition): \(decision.reason)")
    }
    #expect(try RuleSet.parse(Self.rules("\(Self.md5) == 'x'")).evaluate(Self.create(known)).allowed)
  }

  /// A budget that runs out denies, even after an undecided allow.
  @Test func anExhaustedBudgetDeniesEvenWhenUndecided() throws {
    let source = """
      rules_version = '2';
      service firebase.storage {
        match /b/{bucket}/o {
          function wide(d) { return d == 0 ? false : (wide(d - 1) || wide(d - 1)); }
          match /users/{uid}/{file} {
            allow create: if request.resource.md5Hash == 'x';
            allow create: if wide(18);
          }
        }
      }
      """
    let decision = try RuleSet.parse(source).evaluate(Self.create(Self.declared()))
    #expect(!decision.allowed)
    #expect(!decision.undecided, "\(decision.reason)")
  }
}
