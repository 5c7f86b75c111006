/// A glob over object names, as GCS's `matchGlob` reads it: `*` matches any characters but `/`,
/// `**` any characters including `/`, `?` one character but `/`, `[abc]`, `[a-z]` and `[!a]` one
/// of (or none of) a set, `{png,jpg}` one of the alternatives (not nested), `\x` a literal `x`.
///
/// ```swift
/// let glob = try NameGlob("photos/**/*.{png,jpg}")
/// glob.matches("photos/2024/a.png")   // true
/// ```
/// Matching simulates the pattern as a set of positions over the name's Unicode scalars, so it
/// runs in time linear in the name for a given pattern, whatever the stars (no backtracking).
public struct NameGlob: Sendable, Equatable {
  public let pattern: String
  private let alternatives: [[Token]]

  enum Token: Sendable, Equatable {
    case literal(Unicode.Scalar)
    case one
    case star
    case globstar
    case set([ClosedRange<Unicode.Scalar>], negated: Bool)
  }

  /// The longest pattern taken, and how many alternatives its braces may expand to.
  public static let maxPatternBytes = 1024
  static let maxAlternatives = 64

  /// - Throws: ``LarderError/invalidArgument(_:)`` for an unbalanced `[` or `{`, or too large a pattern.
  public init(_ pattern: String) throws(LarderError) {
    guard pattern.utf8.count <= Self.maxPatternBytes else {
      throw .invalidArgument("matchGlob is longer than \(Self.maxPatternBytes) bytes")
    }
    self.pattern = pattern
    var expanded: [[Token]] = [[]]
    var scalars = Array(pattern.unicodeScalars)[...]
    while let c = scalars.popFirst() {
      var choices: [[Token]]
      switch c {
      case "\\":
        guard let next = scalars.popFirst() else {
          throw .invalidArgument("matchGlob ends in a lone backslash")
        }
        choices = [[.literal(next)]]
      case "?": choices = [[.one]]
      case "*":
        if scalars.first == "*" {
          scalars.removeFirst()
          choices = [[.globstar]]
        } else {
          choices = [[.star]]
        }
      case "[": choices = [[try Self.set(&scalars)]]
      case "{":
        guard let close = scalars.firstIndex(of: "}") else {
          throw .invalidArgument("matchGlob has an unclosed '{'")
        }
        let body = scalars[..<close]
        scalars = scalars[scalars.index(after: close)...]
        choices = []
        for part in body.split(separator: ",", omittingEmptySubsequences: false) {
          var literal: [Token] = []
          var rest = part[...]
          while let s = rest.popFirst() {
            if s == "*" || s == "?" || s == "[" || s == "{" {
              throw .invalidArgument("matchGlob alternatives must be plain text")
            }
            literal.append(.literal(s))
          }
          choices.append(literal)
        }
      default: choices = [[.literal(c)]]
      }
      if choices.count == 1 {
        for i in expanded.indices { expanded[i] += choices[0] }
      } else {
        guard expanded.count * choices.count <= Self.maxAlternatives else {
          throw .invalidArgument("matchGlob has too many alternatives")
        }
        expanded = expanded.flatMap { head in choices.map { head + $0 } }
      }
    }
    alternatives = expanded
  }

  private static func set(_ scalars: inout ArraySlice<Unicode.Scalar>) throws(LarderError) -> Token {
    var negated = false
    if scalars.first == "!" || scalars.first == "^" {
      negated = true
      scalars.removeFirst()
    }
    var ranges: [ClosedRange<Unicode.Scalar>] = []
    var first = true
    while true {
      guard let c = scalars.popFirst() else { throw .invalidArgument("matchGlob has an unclosed '['") }
      if c == "]" && !first { break }
      first = false
      if scalars.first == "-", scalars.dropFirst().first.map({ $0 != "]" }) == true {
        scalars.removeFirst()
        let upper = scalars.removeFirst()
        guard c <= upper else { throw .invalidArgument("matchGlob has a reversed range") }
        ranges.append(c...upper)
      } else {
        ranges.append(c...c)
      }
    }
    return .set(ranges, negated: negated)
  }

  /// Whether the whole of `name` matches.
  public func matches(_ name: String) -> Bool {
    let scalars = Array(name.unicodeScalars)
    return alternatives.contains { Self.matches(scalars, $0) }
  }

  private static func matches(_ name: [Unicode.Scalar], _ tokens: [Token]) -> Bool {
    // States: how many tokens are consumed. A star stays in place or is skipped.
    var states = Set(closure([0], tokens))
    for c in name {
      var next = Set<Int>()
      for i in states where i < tokens.count {
        switch tokens[i] {
        case .literal(let l): if l == c { next.insert(i + 1) }
        case .one: if c != "/" { next.insert(i + 1) }
        case .star: if c != "/" { next.insert(i) }
        case .globstar: next.insert(i)
        case .set(let ranges, let negated):
          if ranges.contains(where: { $0.contains(c) }) != negated && c != "/" { next.insert(i + 1) }
        }
      }
      states = Set(closure(Array(next), tokens))
      if states.isEmpty { return false }
    }
    return states.contains(tokens.count)
  }

  /// The states reachable by skipping stars (which may match nothing).
  private static func closure(_ states: [Int], _ tokens: [Token]) -> [Int] {
    var out = Set(states)
    var work = states
    while let i = work.popLast() {
      guard i < tokens.count else { continue }
      if tokens[i] == .star || tokens[i] == .globstar, out.insert(i + 1).inserted { work.append(i + 1) }
    }
    return Array(out)
  }
}
