import Foundation

extension Evaluator {
  func fail(_ message: String, _ location: SourceLocation) -> EvaluationError {
    EvaluationError(message: message, location: location)
  }

  func member(_ base: RuleValue, _ name: String, _ location: SourceLocation) throws(EvaluationError)
    -> RuleValue
  {
    switch base {
    case .map(let m):
      guard let v = Self.value(m, name) else { throw fail("no such key '\(name)' in map", location) }
      return v
    case .unknown:
      return .unknown
    case .null:
      throw fail("cannot read '\(name)' of null", location)
    default:
      throw fail("cannot read '\(name)' of \(base.typeName)", location)
    }
  }

  func index(_ base: RuleValue, _ index: RuleValue, _ location: SourceLocation) throws(EvaluationError)
    -> RuleValue
  {
    switch (base, index) {
    case (.unknown, _), (_, .unknown):
      return .unknown
    case (.map(let m), .string(let key)):
      guard let v = Self.value(m, key) else { throw fail("no such key '\(key)' in map", location) }
      return v
    case (.list(let items), .int(let i)):
      guard i >= 0 && i < items.count else {
        throw fail("list index \(i) out of range (size \(items.count))", location)
      }
      return items[Int(i)]
    case (.path(let segments), .int(let i)):
      guard i >= 0 && i < segments.count else { throw fail("path index \(i) out of range", location) }
      return .string(segments[Int(i)])
    case (.string(let s), .int(let i)):
      let scalars = Array(s.unicodeScalars)
      guard i >= 0 && i < scalars.count else { throw fail("string index \(i) out of range", location) }
      return .string(String(scalars[Int(i)]))
    default:
      throw fail("cannot index \(base.typeName) with \(index.typeName)", location)
    }
  }

  func unary(_ op: UnaryOperator, _ value: RuleValue, _ location: SourceLocation) throws(EvaluationError)
    -> RuleValue
  {
    switch (op, value) {
    case (_, .unknown): return .unknown
    case (.not, .bool(let b)): return .bool(!b)
    case (.negate, .int(let i)):
      guard i != .min else { throw fail("integer overflow", location) }
      return .int(-i)
    case (.negate, .float(let f)): return .float(-f)
    case (.negate, .duration(let ns)):
      guard ns != .min else { throw fail("duration overflow", location) }
      return .duration(nanoseconds: -ns)
    default:
      throw fail("operator '\(op.rawValue)' cannot be applied to \(value.typeName)", location)
    }
  }

  func binary(_ op: BinaryOperator, _ l: RuleValue, _ r: RuleValue, _ location: SourceLocation)
    throws(EvaluationError) -> RuleValue
  {
    /// A known truth value, or unknown.
    func truth(_ b: Bool?) -> RuleValue { b.map { .bool($0) } ?? .unknown }
    switch op {
    case .equal: return truth(try equals(l, r, location))
    case .notEqual: return truth(try equals(l, r, location).map { !$0 })
    case .less: return truth(try compare(l, r, location).map { $0 < 0 })
    case .lessEqual: return truth(try compare(l, r, location).map { $0 <= 0 })
    case .greater: return truth(try compare(l, r, location).map { $0 > 0 })
    case .greaterEqual: return truth(try compare(l, r, location).map { $0 >= 0 })
    case .in: return truth(try contains(r, l, location))
    case .add, .subtract, .multiply, .divide, .remainder:
      if l.isUnknown || r.isUnknown { return .unknown }
      return try arithmetic(op, l, r, location)
    case .and, .or: throw fail("internal: logical operator in binary()", location)
    }
  }

  /// Language equality: numbers compare across int/float, a path equals its string form,
  /// values of different types are simply unequal. Nil when it depends on a value not known
  /// yet: lists and maps are unequal as soon as one known element (or the size, or a key) differs.
  func equals(_ l: RuleValue, _ r: RuleValue, _ location: SourceLocation) throws(EvaluationError) -> Bool? {
    switch (l, r) {
    case (.unknown, _), (_, .unknown): return nil
    case (.int(let a), .float(let b)): return Double(a) == b
    case (.float(let a), .int(let b)): return a == Double(b)
    case (.string(let a), .string(let b)): return a.utf8.elementsEqual(b.utf8)
    case (.path(let a), .string(let b)), (.string(let b), .path(let a)):
      let joined = a.joined(separator: "/")
      return joined.utf8.elementsEqual(b.utf8) || ("/" + joined).utf8.elementsEqual(b.utf8)
    case (.path(let a), .path(let b)):
      return a.count == b.count && zip(a, b).allSatisfy { $0.utf8.elementsEqual($1.utf8) }
    case (.list(let a), .list(let b)):
      guard a.count == b.count else { return false }
      try charge(a.count / 16, at: location)
      let unequal = try some(zip(a, b)) { (x, y) throws(EvaluationError) in
        try equals(x, y, location).map(!)
      }
      return unequal.map(!)
    case (.map(let a), .map(let b)):
      guard a.count == b.count else { return false }
      try charge(a.count / 16, at: location)
      for key in a.keys where Self.value(b, key) == nil { return false }
      let unequal = try some(a) { (key, x) throws(EvaluationError) in
        try equals(x, Self.value(b, key)!, location).map(!)
      }
      return unequal.map(!)
    default:
      return l == r
    }
  }

  /// -1, 0 or 1; only numbers, strings, timestamps, durations and bools are ordered. Nil when
  /// either is not known yet.
  func compare(_ l: RuleValue, _ r: RuleValue, _ location: SourceLocation) throws(EvaluationError) -> Int? {
    func order<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : (a == b ? 0 : 1) }
    switch (l, r) {
    case (.unknown, _), (_, .unknown): return nil
    case (.int(let a), .int(let b)): return order(a, b)
    case (.int(let a), .float(let b)): return order(Double(a), b)
    case (.float(let a), .int(let b)): return order(a, Double(b))
    case (.float(let a), .float(let b)):
      guard !a.isNaN && !b.isNaN else { throw fail("cannot order NaN", location) }
      return order(a, b)
    case (.string(let a), .string(let b)):
      try charge(min(a.utf8.count, b.utf8.count) / 4096, at: location)
      return a.utf8.lexicographicallyPrecedes(b.utf8) ? -1 : (a.utf8.elementsEqual(b.utf8) ? 0 : 1)
    case (.timestamp(let a), .timestamp(let b)): return order(a, b)
    case (.duration(let a), .duration(let b)): return order(a, b)
    case (.bool(let a), .bool(let b)): return order(a ? 1 : 0, b ? 1 : 0)
    default:
      throw fail("cannot compare \(l.typeName) with \(r.typeName)", location)
    }
  }

  /// `element in collection`: nil when no known element is equal and some is not known yet.
  func contains(_ collection: RuleValue, _ element: RuleValue, _ location: SourceLocation)
    throws(EvaluationError) -> Bool?
  {
    switch collection {
    case .list(let items):
      try charge(items.count / 16, at: location)
      return try some(items) { item throws(EvaluationError) in try equals(item, element, location) }
    case .map(let m):
      if element.isUnknown { return nil }
      guard case .string(let key) = element else { return false }
      return Self.value(m, key) != nil
    case .unknown:
      return nil
    default:
      throw fail("'in' needs a list or map on the right, got \(collection.typeName)", location)
    }
  }

  /// The value under `key` when a key of `map` has exactly its bytes: a Swift dictionary finds
  /// keys by canonical equivalence ("K" would find the Kelvin sign's entry).
  static func value(_ map: [String: RuleValue], _ key: String) -> RuleValue? {
    guard let i = map.index(forKey: key), map[i].key.utf8.elementsEqual(key.utf8) else { return nil }
    return map[i].value
  }

  /// Kleene's "for some": true when `test` is true for an element, else nil when it is unknown
  /// for one, else false. Stops at the first true.
  func some<Elements: Sequence>(
    _ elements: Elements, _ test: (Elements.Element) throws(EvaluationError) -> Bool?
  ) throws(EvaluationError) -> Bool? {
    var known = true
    for element in elements {
      switch try test(element) {
      case true?: return true
      case false?: break
      case nil: known = false
      }
    }
    return known ? false : nil
  }

  func checkedString(_ s: String, _ location: SourceLocation) throws(EvaluationError) -> RuleValue {
    guard s.utf8.count <= EvaluationLimits.maxStringBytes else {
      throw EvaluationError(message: "string result too large", location: location, exhausted: true)
    }
    return .string(s)
  }

  private func arithmetic(_ op: BinaryOperator, _ l: RuleValue, _ r: RuleValue, _ location: SourceLocation)
    throws(EvaluationError) -> RuleValue
  {
    switch (op, l, r) {
    case (_, .int(let a), .int(let b)):
      let result: (Int64, Bool)
      switch op {
      case .add: result = a.addingReportingOverflow(b)
      case .subtract: result = a.subtractingReportingOverflow(b)
      case .multiply: result = a.multipliedReportingOverflow(by: b)
      case .divide:
        guard b != 0 else { throw fail("integer division by zero", location) }
        result = a.dividedReportingOverflow(by: b)
      default:
        guard b != 0 else { throw fail("integer modulo by zero", location) }
        result = a.remainderReportingOverflow(dividingBy: b)
      }
      guard !result.1 else { throw fail("integer overflow", location) }
      return .int(result.0)
    case (_, .int, .float), (_, .float, .int), (_, .float, .float):
      let a = try number(l, location)
      let b = try number(r, location)
      switch op {
      case .add: return .float(a + b)
      case .subtract: return .float(a - b)
      case .multiply: return .float(a * b)
      case .divide: return .float(a / b)
      default: return .float(a.truncatingRemainder(dividingBy: b))
      }
    case (.add, .string(let a), .string(let b)):
      try charge((a.utf8.count + b.utf8.count) / 4096, at: location)
      return try checkedString(a + b, location)
    case (.add, .list(let a), .list(let b)):
      guard a.count + b.count <= EvaluationLimits.maxCollectionCount else {
        throw EvaluationError(message: "list result too large", location: location, exhausted: true)
      }
      try charge((a.count + b.count) / 64, at: location)
      return .list(a + b)
    case (.add, .timestamp(let t), .duration(let d)), (.add, .duration(let d), .timestamp(let t)):
      return .timestamp(t.addingTimeInterval(Double(d) / 1e9))
    case (.subtract, .timestamp(let t), .duration(let d)):
      return .timestamp(t.addingTimeInterval(-Double(d) / 1e9))
    case (.subtract, .timestamp(let a), .timestamp(let b)):
      let ns = (a.timeIntervalSince1970 - b.timeIntervalSince1970) * 1e9
      guard ns.magnitude < 9.2e18 else { throw fail("duration overflow", location) }
      return .duration(nanoseconds: Int64(ns.rounded()))
    case (.add, .duration(let a), .duration(let b)), (.subtract, .duration(let a), .duration(let b)):
      let (v, overflow) = op == .add ? a.addingReportingOverflow(b) : a.subtractingReportingOverflow(b)
      guard !overflow else { throw fail("duration overflow", location) }
      return .duration(nanoseconds: v)
    default:
      throw fail("operator '\(op.rawValue)' cannot be applied to \(l.typeName) and \(r.typeName)", location)
    }
  }

  func number(_ v: RuleValue, _ location: SourceLocation) throws(EvaluationError) -> Double {
    switch v {
    case .int(let i): return Double(i)
    case .float(let f): return f
    default: throw fail("expected a number, got \(v.typeName)", location)
    }
  }
}
