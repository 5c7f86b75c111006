import LarderRules
import Testing

/// RE2 semantics of `matches`: full match, RE2 syntax, bounded cache.
struct RegexTests {
  static func allows(_ condition: String) throws -> Bool {
    let rules = try RuleSet.parse(
      "service firebase.storage { match /b/{b}/o/{f} { allow get: if \(condition); } }")
    return rules.evaluate(RuleRequest(operation: .get, bucket: "b", objectName: "f")).allowed
  }

  @Test func matchesIsAFullMatch() throws {
    #expect(try Self.allows("'image/png'.matches('image/.*')") == true)
    #expect(try Self.allows("'image/png'.matches('image')") == false)
    #expect(try Self.allows("'x-image/png'.matches('image/.*')") == false)
  }

  @Test func re2SyntaxIsSupported() throws {
    #expect(try Self.allows("'abc123'.matches('[[:alpha:]]+\\\\d+')") == true)
    #expect(try Self.allows("'ÄÖ'.matches('\\\\p{Lu}+')") == true)
    #expect(try Self.allows("'AbC'.matches('(?i)abc')") == true)
  }

  @Test func backreferencesAreRejectedLikeRE2() throws {
    // RE2 has no backreferences; an invalid pattern is a runtime error, hence deny.
    #expect(try Self.allows("'aa'.matches('(a)\\\\1')") == false)
    #expect(try Self.allows("'aa'.matches('(a)\\\\1') || true") == true)
  }

  @Test func manyDistinctPatternsStayCorrect() throws {
    // More distinct patterns than the cache holds (256): each still compiles and matches.
    for i in 0..<300 {
      #expect(try Self.allows("'x\(i)'.matches('x\(i)')") == true)
    }
  }
}
