import Larder
import Testing

@Suite struct NameGlobTests {
  @Test func globsMatchAsGCSMatchGlobDoes() throws {
    let cases: [(String, String, Bool)] = [
      ("*.txt", "a.txt", true), ("*.txt", "d/a.txt", false), ("**.txt", "d/e/a.txt", true),
      ("d/**", "d/e/f", true), ("d/*", "d/e/f", false), ("a?c", "abc", true), ("a?c", "a/c", false),
      ("[ab]x", "bx", true), ("[!ab]x", "cx", true), ("[!ab]x", "ax", false), ("[a-c]1", "b1", true),
      ("*.{png,jpg}", "p.jpg", true), ("*.{png,jpg}", "p.gif", false), ("\\*", "*", true),
      ("\\*", "a", false),
      ("ünï*", "ünïcödé", true), ("a*b*c*d", "aXbYcZd", true), ("a*b*c*d", "aXbYcZ", false),
    ]
    for (pattern, name, expected) in cases {
      #expect(try NameGlob(pattern).matches(name) == expected, "\(pattern) ~ \(name)")
    }
    // Many stars stay linear.
    #expect(
      try !NameGlob(String(repeating: "*a", count: 40) + "b").matches(String(repeating: "a", count: 2000)))
  }

  @Test func malformedGlobsAreRefused() {
    for pattern in ["[ab", "{a,b", "a\\", "[z-a]", "{a*,b}", String(repeating: "x", count: 1025)] {
      #expect(throws: LarderError.self) { try NameGlob(pattern) }
    }
  }
}
