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
      ("x{,.bak}", "x", true), ("x{,.bak}", "x.bak", true), ("x{,.bak}", "x.ba", false),
      ("{a,ab}{c,bc}", "abc", true), ("{a,ab}{c,bc}", "abbc", true), ("{a,ab}{c,bc}", "ab", false),
    ]
    for (pattern, name, expected) in cases {
      #expect(try NameGlob(pattern).matches(name) == expected, "\(pattern) ~ \(name)")
    }
    // Many stars stay linear.
    #expect(
      try !NameGlob(String(repeating: "*a", count: 40) + "b").matches(String(repeating: "a", count: 2000)))
  }

  /// The red team's pattern (issue 37): `**?` × 328 and six two-way braces. Matching it used to
  /// cost the square of the name times 64 expansions; now one pass over the name.
  @Test func theRedTeamsGlobMatchesAsBacktrackingWould() throws {
    let pattern = String(repeating: "**?", count: 328) + String(repeating: "{x,y}", count: 6)
    let glob = try NameGlob(pattern)
    for name in ["public/bulk/00/0001", String(repeating: "a", count: 334), String(repeating: "a", count: 328) + "xyxyxy"] {
      #expect(glob.matches(name) == ReferenceGlob.matches(pattern, name), "\(name.prefix(20))…")
    }
    #expect(glob.matches(String(repeating: "a", count: 328) + "xyxyxy"))
    #expect(!glob.matches(String(repeating: "a", count: 333) + "xyxyxz"))
  }

  /// Thousands of random globs and names over a small alphabet, against a backtracking matcher
  /// written independently from the pattern text.
  @Test func randomGlobsAgreeWithAReferenceMatcher() throws {
    var rng = SplitMix(seed: 37)
    let pieces = ["a", "b", "/", ".", "*", "**", "?", "[ab]", "[!a]", "[a-b]", "{a,b}", "{,a}", "{ab,b/}", "\\*"]
    let letters: [Character] = ["a", "b", "/", ".", "*"]
    var checked = 0
    for _ in 0..<3000 {
      let pattern = (0..<rng.next(upTo: 7)).map { _ in pieces[rng.next(upTo: pieces.count)] }.joined()
      let glob = try NameGlob(pattern)
      for _ in 0..<8 {
        let name = String((0..<rng.next(upTo: 9)).map { _ in letters[rng.next(upTo: letters.count)] })
        let expected = ReferenceGlob.matches(pattern, name)
        #expect(glob.matches(name) == expected, "\(pattern) ~ \(name)")
        if expected { checked += 1 }
      }
    }
    #expect(checked > 1000)
  }

  @Test func malformedGlobsAreRefused() {
    for pattern in ["[ab", "{a,b", "a\\", "[z-a]", "{a*,b}", String(repeating: "x", count: 1025),
                    String(repeating: "{a,b}", count: 7)] {
      #expect(throws: LarderError.self) { try NameGlob(pattern) }
    }
  }
}

/// A deterministic generator, so a failure names its case.
struct SplitMix {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next(upTo bound: Int) -> Int {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return Int((z ^ (z >> 31)) % UInt64(bound))
  }
}

/// The obvious backtracking matcher over the pattern text (exponential in the worst case, fine
/// for the short cases here), memoised on positions.
enum ReferenceGlob {
  static func matches(_ pattern: String, _ name: String) -> Bool {
    let p = Array(pattern.unicodeScalars)
    let n = Array(name.unicodeScalars)
    var memo: [Int: Bool] = [:]
    func at(_ i: Int, _ j: Int) -> Bool {
      let key = i * (n.count + 1) + j
      if let known = memo[key] { return known }
      let result = step(i, j)
      memo[key] = result
      return result
    }
    func step(_ i: Int, _ j: Int) -> Bool {
      guard i < p.count else { return j == n.count }
      switch p[i] {
      case "\\": return j < n.count && n[j] == p[i + 1] && at(i + 2, j + 1)
      case "*":
        if i + 1 < p.count && p[i + 1] == "*" { return at(i + 2, j) || (j < n.count && at(i, j + 1)) }
        return at(i + 1, j) || (j < n.count && n[j] != "/" && at(i, j + 1))
      case "?": return j < n.count && n[j] != "/" && at(i + 1, j + 1)
      case "[":
        var k = i + 1
        let negated = p[k] == "!" || p[k] == "^"
        if negated { k += 1 }
        var hit = false
        var first = true
        while p[k] != "]" || first {
          first = false
          if p[k + 1] == "-" && p[k + 2] != "]" {
            if j < n.count && (p[k]...p[k + 2]).contains(n[j]) { hit = true }
            k += 3
          } else {
            if j < n.count && p[k] == n[j] { hit = true }
            k += 1
          }
        }
        return j < n.count && n[j] != "/" && hit != negated && at(k + 1, j + 1)
      case "{":
        let close = p[i...].firstIndex(of: "}")!
        return p[(i + 1)..<close].split(separator: "}", omittingEmptySubsequences: false)[0]
          .split(separator: ",", omittingEmptySubsequences: false)
          .contains { alt in n[j...].starts(with: alt) && at(close + 1, j + alt.count) }
      default: return j < n.count && n[j] == p[i] && at(i + 1, j + 1)
      }
    }
    return at(0, 0)
  }
}
