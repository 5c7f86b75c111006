/// A glob over object names, as GCS's `matchGlob` reads it: `*` matches any characters but `/`,
/// `**` any characters including `/`, `?` one character but `/`, `[abc]`, `[a-z]` and `[!a]` one
/// of (or none of) a set, `{png,jpg}` one of the alternatives (not nested), `\x` a literal `x`.
///
/// ```swift
/// let glob = try NameGlob("photos/**/*.{png,jpg}")
/// glob.matches("photos/2024/a.png")   // true
/// ```
/// The pattern compiles to one automaton (alternatives are branches of it, not copies of the
/// pattern), simulated over the name's Unicode scalars with each state held at most once: a
/// match costs at most O(name × pattern) steps whatever the stars and braces, with no
/// backtracking and no set allocation per step.
public struct NameGlob: Sendable, Equatable {
  public let pattern: String
  /// States in an order where every skip (a star matching nothing, an empty alternative) goes
  /// forward; the last one accepts.
  private let states: [State]
  /// The fewest scalars a matching name has: a shorter name (fewer UTF-8 bytes, even) is
  /// refused before any matching.
  private let minimumScalars: Int

  enum Step: Sendable {
    case literal(Unicode.Scalar)
    case one
    case any
    case set([ClosedRange<Unicode.Scalar>], negated: Bool)

    func accepts(_ c: Unicode.Scalar) -> Bool {
      switch self {
      case .literal(let l): l == c
      case .one: c != "/"
      case .any: true
      case .set(let ranges, let negated): c != "/" && ranges.contains(where: { $0.contains(c) }) != negated
      }
    }
  }

  struct Edge: Sendable {
    let step: Step
    let target: Int
  }

  struct State: Sendable {
    var edges: [Edge] = []
    /// Reached without consuming anything.
    var skip: Int?
  }

  /// One piece of the pattern between two join states.
  private enum Element {
    case step(Step)
    case star(Step)
    case choice([[Unicode.Scalar]])
  }

  /// The longest pattern taken, and how many alternatives its braces may expand to.
  public static let maxPatternBytes = 1024
  static let maxAlternatives = 64

  public static func == (a: NameGlob, b: NameGlob) -> Bool { a.pattern == b.pattern }

  /// - Throws: ``LarderError/invalidArgument(_:)`` for an unbalanced `[` or `{`, or too large a pattern.
  public init(_ pattern: String) throws(LarderError) {
    guard pattern.utf8.count <= Self.maxPatternBytes else {
      throw .invalidArgument("matchGlob is longer than \(Self.maxPatternBytes) bytes")
    }
    self.pattern = pattern
    var elements: [Element] = []
    var expansions = 1
    var scalars = Array(pattern.unicodeScalars)[...]
    while let c = scalars.popFirst() {
      switch c {
      case "\\":
        guard let next = scalars.popFirst() else {
          throw .invalidArgument("matchGlob ends in a lone backslash")
        }
        elements.append(.step(.literal(next)))
      case "?": elements.append(.step(.one))
      case "*":
        if scalars.first == "*" {
          scalars.removeFirst()
          elements.append(.star(.any))
        } else {
          elements.append(.star(.one))
        }
      case "[": elements.append(.step(try Self.set(&scalars)))
      case "{":
        guard let close = scalars.firstIndex(of: "}") else {
          throw .invalidArgument("matchGlob has an unclosed '{'")
        }
        let body = scalars[..<close]
        scalars = scalars[scalars.index(after: close)...]
        var choices: [[Unicode.Scalar]] = []
        for part in body.split(separator: ",", omittingEmptySubsequences: false) {
          if part.contains(where: { $0 == "*" || $0 == "?" || $0 == "[" || $0 == "{" }) {
            throw .invalidArgument("matchGlob alternatives must be plain text")
          }
          choices.append(Array(part))
        }
        // GCS's bound on the expanded pattern, kept although matching no longer expands it.
        guard expansions * choices.count <= Self.maxAlternatives else {
          throw .invalidArgument("matchGlob has too many alternatives")
        }
        expansions *= choices.count
        elements.append(.choice(choices))
      default: elements.append(.step(.literal(c)))
      }
    }
    states = Self.compile(elements)
    minimumScalars = elements.reduce(0) { total, element in
      switch element {
      case .step: total + 1
      case .star: total
      case .choice(let choices): total + (choices.map(\.count).min() ?? 0)
      }
    }
  }

  private static func set(_ scalars: inout ArraySlice<Unicode.Scalar>) throws(LarderError) -> Step {
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

  /// A join state before each element and after the last; an alternative's inner states sit
  /// between its two joins, so skips (join to next join) always go forward.
  private static func compile(_ elements: [Element]) -> [State] {
    var states = [State()]
    for element in elements {
      let join = states.count - 1
      switch element {
      case .step(let step):
        states[join].edges.append(Edge(step: step, target: join + 1))
      case .star(let step):
        states[join].edges.append(Edge(step: step, target: join))
        states[join].skip = join + 1
      case .choice(let choices):
        let next = join + 1 + choices.reduce(0) { $0 + max($1.count - 1, 0) }
        for choice in choices {
          guard !choice.isEmpty else {
            states[join].skip = next
            continue
          }
          var from = join
          for (k, c) in choice.enumerated() {
            let to = k == choice.count - 1 ? next : states.count
            if to != next { states.append(State()) }
            states[from].edges.append(Edge(step: .literal(c), target: to))
            from = to
          }
        }
        precondition(states.count == next, "alternative states miscounted")
      }
      states.append(State())
    }
    return states
  }

  /// Whether the whole of `name` matches.
  public func matches(_ name: String) -> Bool {
    guard name.utf8.count >= minimumScalars else { return false }
    // `marked[s] == round`: state s is already in this round's set.
    var marked = [Int](repeating: -1, count: states.count)
    var current: [Int] = []
    var next: [Int] = []
    var round = 0
    func enter(_ state: Int, into set: inout [Int]) {
      var s: Int? = state
      while let t = s, marked[t] != round {
        marked[t] = round
        set.append(t)
        s = states[t].skip
      }
    }
    enter(0, into: &current)
    for c in name.unicodeScalars {
      round += 1
      next.removeAll(keepingCapacity: true)
      for s in current {
        for edge in states[s].edges where edge.step.accepts(c) { enter(edge.target, into: &next) }
      }
      if next.isEmpty { return false }
      swap(&current, &next)
    }
    return marked[states.count - 1] == round
  }
}
