import Foundation
import LarderRules
import Testing

/// User-defined functions: scoping, `let`, recursion and its bounds.
struct FunctionRuleTests {
  static let source = """
    rules_version = '2';
    service firebase.storage {
      function signedIn() { return request.auth != null; }
      match /b/{bucket}/o {
        function isOwner(uid) { return signedIn() && request.auth.uid == uid; }
        function sizeOk(limitMiB) {
          let limit = limitMiB * 1024 * 1024;
          let size = request.resource.size;
          return size <= limit;
        }
        function inBucket() { return bucket == 'bkt'; }
        function fact(n) { return n <= 1 ? 1 : n * fact(n - 1); }
        match /users/{uid}/{file} {
          function isImage() { return request.resource.contentType.matches('image/.*'); }
          allow create: if isOwner(uid) && sizeOk(1) && isImage() && inBucket();
          allow get: if fact(5) == 120;
        }
        match /loop/{n} {
          function forever(x) { return forever(x + 1); }
          function wide(d) { return d == 0 ? false : (wide(d - 1) || wide(d - 1)); }
          function grow(s, d) { return d == 0 ? s.size() == 0 : grow(s + s, d - 1); }
          allow get: if forever(0);
          allow list: if wide(18);
          allow delete: if grow('0123456789abcdef', 20);
          allow update: if fact(19) > 0;
        }
      }
    }
    """

  static let rules = Result { try RuleSet.parse(source) }

  @Test func functionsFromOuterScopesAndLetsWork() throws {
    let rules = try Self.rules.get()
    let ok = rules.evaluate(Fixtures.request(.create, "users/u1/a.png", uid: "u1", size: 1 << 20))
    #expect(ok.allowed == true)
    #expect(ok.rule == "storage.rules:15:7")
    #expect(
      rules.evaluate(Fixtures.request(.create, "users/u1/a.png", uid: "u1", size: (1 << 20) + 1)).allowed
        == false)
    #expect(
      rules.evaluate(Fixtures.request(.create, "users/u1/a.txt", uid: "u1", contentType: "text/plain"))
        .allowed == false)
    #expect(rules.evaluate(Fixtures.request(.create, "users/u1/a.png", uid: "u2")).allowed == false)
    #expect(rules.evaluate(Fixtures.request(.create, "users/u1/a.png")).allowed == false)
    #expect(rules.evaluate(Fixtures.request(.get, "users/u1/a.png")).allowed == true)
  }

  @Test func infiniteRecursionStopsAtTheCallDepth() throws {
    let decision = try Self.rules.get().evaluate(Fixtures.request(.get, "loop/1"))
    #expect(decision.allowed == false)
    #expect(decision.reason.hasSuffix("function calls nested deeper than 20 (in 'forever')"))
  }

  @Test func exponentialRecursionStopsAtTheStepBudget() throws {
    let decision = try Self.rules.get().evaluate(Fixtures.request(.list, "loop/1"))
    #expect(decision.allowed == false)
    #expect(decision.reason.hasSuffix("evaluation exceeded 10000 steps"))
  }

  @Test func stringDoublingStopsAtTheSizeLimit() throws {
    let decision = try Self.rules.get().evaluate(Fixtures.request(.delete, "loop/1"))
    #expect(decision.allowed == false)
    #expect(decision.reason.hasSuffix("string result too large"))
  }

  @Test func recursionWithinTheDepthLimitWorks() throws {
    // fact(19) nests 19 calls (the limit is 20) and fits in Int64.
    let decision = try Self.rules.get().evaluate(Fixtures.request(.update, "loop/1"))
    #expect(decision.allowed == true)
  }

  @Test func wrongArgumentCountDenies() throws {
    let rules = try RuleSet.parse(
      "service firebase.storage { function f(a, b) { return true; } match /b/{x}/o/{y} { allow get: if f(1); } }"
    )
    let decision = rules.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: "y"))
    #expect(decision.allowed == false)
    #expect(decision.reason.hasSuffix("function 'f' takes 2 arguments, got 1"))
  }

  @Test func functionsDoNotSeeSiblingScopes() throws {
    let rules = try RuleSet.parse(
      """
      service firebase.storage { match /b/{x}/o {
        match /a/{f} { function hidden() { return true; } allow get: if hidden(); }
        match /b/{f} { allow get: if hidden(); }
      } }
      """)
    #expect(rules.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: "a/1")).allowed == true)
    let denied = rules.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: "b/1"))
    #expect(denied.allowed == false)
    #expect(denied.reason.hasSuffix("unknown function 'hidden'"))
  }
}
