import Testing

@testable import LarderRules

/// The compiled-pattern cache stays bounded and remembers invalid patterns.
struct RegexCacheTests {
  @Test func cacheEvictsOldestBeyondCapacity() throws {
    let cache = RegexCache(capacity: 4)
    for i in 0..<10 {
      #expect(try cache.pattern("p\(i)").fullMatch("p\(i)") == true)
    }
    #expect(cache.count == 4)
    #expect(try cache.pattern("p9").fullMatch("p8") == false)
  }

  @Test func invalidPatternsReportRE2Errors() {
    let cache = RegexCache(capacity: 4)
    #expect(throws: RegexError.self) { try cache.pattern("(") }
    do {
      _ = try cache.pattern("(")
    } catch {
      #expect(error.message == "missing ): (")
    }
    #expect(cache.count == 1)
  }

  @Test func findAllAdvancesOverEmptyMatches() throws {
    let re = try RE2Pattern("x*")
    #expect(re.findAll(in: Array("aé".utf8), limit: 10) == [0..<0, 1..<1, 3..<3])
  }
}
