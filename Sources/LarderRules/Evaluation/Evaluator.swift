/// Evaluates rule conditions for one request with a shared step budget.
///
/// Three-valued: a field not known yet reads as ``RuleValue/unknown``, and so is whatever
/// depends on it (operators, built-in functions and methods, `is`, a ternary's condition),
/// unless the known operands decide alone: `&&`/`||` follow Kleene logic, equality of lists and
/// maps, `in` and `hasAny`/`hasAll`/`hasOnly` answer when a known element decides. Without
/// unknown inputs nothing is unknown, so the two-valued semantics are unchanged.
///
/// Per-request and single-threaded; `RuleSet.evaluate` creates one for each call.
final class Evaluator {
  /// `request` and `resource`.
  let globals: [String: RuleValue]
  let regexCache: RegexCache
  private(set) var steps = 0
  private var depth = 0
  private var callDepth = 0

  init(globals: [String: RuleValue], regexCache: RegexCache = .shared) {
    self.globals = globals
    self.regexCache = regexCache
  }

  /// Charges `cost` steps; throws an unabsorbable error when the budget is gone.
  func charge(_ cost: Int, at location: SourceLocation) throws(EvaluationError) {
    steps += cost
    if steps > EvaluationLimits.maxSteps {
      throw EvaluationError(
        message: "evaluation exceeded \(EvaluationLimits.maxSteps) steps", location: location, exhausted: true
      )
    }
  }

  /// Evaluates a condition: nil when it depends on a value not known yet; any other
  /// non-boolean result is an error.
  func condition(_ expr: Expr, scope: Scope) throws(EvaluationError) -> Bool? {
    let value = try eval(expr, Frame(locals: [:], scope: scope))
    switch value {
    case .bool(let b): return b
    case .unknown: return nil
    default:
      throw EvaluationError(message: "condition is \(value.typeName), not bool", location: expr.location)
    }
  }

  func eval(_ expr: Expr, _ frame: Frame) throws(EvaluationError) -> RuleValue {
    try charge(1, at: expr.location)
    depth += 1
    defer { depth -= 1 }
    if depth > EvaluationLimits.maxEvaluationDepth {
      throw EvaluationError(message: "evaluation nested too deeply", location: expr.location, exhausted: true)
    }
    switch expr.kind {
    case .literal(let v):
      return v
    case .identifier(let name):
      return try lookup(name, frame, expr.location)
    case .member(let base, let name):
      return try member(try eval(base, frame), name, expr.location)
    case .index(let base, let index):
      return try self.index(try eval(base, frame), try eval(index, frame), expr.location)
    case .call(let callee, let arguments):
      return try call(callee, arguments, frame, expr.location)
    case .unary(let op, let operand):
      return try unary(op, try eval(operand, frame), expr.location)
    case .binary(.and, let lhs, let rhs):
      return try logical(isAnd: true, lhs, rhs, frame, expr.location)
    case .binary(.or, let lhs, let rhs):
      return try logical(isAnd: false, lhs, rhs, frame, expr.location)
    case .binary(let op, let lhs, let rhs):
      let l = try eval(lhs, frame)
      let r = try eval(rhs, frame)
      return try binary(op, l, r, expr.location)
    case .ternary(let condition, let whenTrue, let whenFalse):
      let c = try eval(condition, frame)
      if c.isUnknown { return .unknown }
      guard case .bool(let b) = c else {
        throw EvaluationError(
          message: "ternary condition is \(c.typeName), not bool", location: condition.location)
      }
      return try eval(b ? whenTrue : whenFalse, frame)
    case .list(let items):
      var values: [RuleValue] = []
      values.reserveCapacity(items.count)
      for item in items { values.append(try eval(item, frame)) }
      return .list(values)
    case .map(let entries):
      var values: [String: RuleValue] = [:]
      for (key, item) in entries { values[key] = try eval(item, frame) }
      return .map(values)
    case .isType(let operand, let typeName):
      let v = try eval(operand, frame)
      if v.isUnknown { return .unknown }
      if typeName == "number" {
        if case .int = v { return .bool(true) }
        if case .float = v { return .bool(true) }
        return .bool(false)
      }
      return .bool(v.typeName == typeName)
    }
  }

  private func lookup(_ name: String, _ frame: Frame, _ location: SourceLocation) throws(EvaluationError)
    -> RuleValue
  {
    if let v = frame.locals[name] { return v }
    if let v = frame.scope.variable(name) { return v }
    if let v = globals[name] { return v }
    if ["math", "timestamp", "duration"].contains(name) {
      throw EvaluationError(message: "'\(name)' is a namespace, not a value", location: location)
    }
    throw EvaluationError(message: "unknown variable '\(name)'", location: location)
  }

  /// Firebase's error-tolerant `&&`/`||`: an error on one side is absorbed when the other
  /// side alone decides the result (`error || true` is true, `error && false` is false).
  /// With Kleene's unknown: `true || unknown` is true and `false && unknown` false, either way
  /// round; otherwise unknown, except that `&&` with an error on the other side is that error
  /// (false or an error, it denies whatever the unknown turns out to be).
  private func logical(
    isAnd: Bool, _ lhs: Expr, _ rhs: Expr, _ frame: Frame, _ location: SourceLocation
  ) throws(EvaluationError) -> RuleValue {
    let decisive = !isAnd  // the value that short-circuits: false for &&, true for ||
    /// One side: a bool, nil for unknown, or the error it failed with (unless the budget ran out).
    func side(_ expr: Expr) throws(EvaluationError) -> Result<Bool?, EvaluationError> {
      do throws(EvaluationError) {
        switch try eval(expr, frame) {
        case .bool(let b): return .success(b)
        case .unknown: return .success(nil)
        case let other:
          throw EvaluationError(
            message: "'\(isAnd ? "&&" : "||")' needs bool operands, got \(other.typeName)",
            location: expr.location)
        }
      } catch {
        if error.exhausted { throw error }
        return .failure(error)
      }
    }
    let left = try side(lhs)
    if case .success(decisive?) = left { return .bool(decisive) }
    let right = try side(rhs)
    if case .success(decisive?) = right { return .bool(decisive) }
    let unknown = [left, right].contains { if case .success(nil) = $0 { true } else { false } }
    if unknown && !isAnd { return .unknown }
    if case .failure(let error) = right { throw error }
    if case .failure(let error) = left { throw error }
    return unknown ? .unknown : .bool(!decisive)
  }

  private func call(
    _ callee: Expr, _ arguments: [Expr], _ frame: Frame, _ location: SourceLocation
  ) throws(EvaluationError) -> RuleValue {
    func evalArguments() throws(EvaluationError) -> [RuleValue] {
      var values: [RuleValue] = []
      for a in arguments { values.append(try eval(a, frame)) }
      return values
    }
    // A built-in applied to a value not known yet gives one not known yet; a user function's
    // body sees its unknown arguments and decides for itself.
    switch callee.kind {
    case .identifier(let name):
      if let (function, declaringScope) = frame.scope.function(name) {
        return try invoke(function, declaringScope, try evalArguments(), location)
      }
      let values = try evalArguments()
      if values.contains(where: \.isUnknown) { return .unknown }
      return try globalFunction(name, values, location)
    case .member(let receiver, let name):
      if case .identifier(let namespace) = receiver.kind,
        ["math", "timestamp", "duration"].contains(namespace),
        frame.locals[namespace] == nil, frame.scope.variable(namespace) == nil
      {
        let values = try evalArguments()
        if values.contains(where: \.isUnknown) { return .unknown }
        return try namespaceFunction(namespace, name, values, location)
      }
      let target = try eval(receiver, frame)
      let values = try evalArguments()
      if target.isUnknown || values.contains(where: \.isUnknown) { return .unknown }
      return try method(target, name, values, location)
    default:
      throw EvaluationError(message: "expression is not callable", location: location)
    }
  }

  private func invoke(
    _ function: FunctionDecl, _ declaringScope: Scope, _ arguments: [RuleValue], _ location: SourceLocation
  ) throws(EvaluationError) -> RuleValue {
    guard arguments.count == function.parameters.count else {
      throw EvaluationError(
        message:
          "function '\(function.name)' takes \(function.parameters.count) arguments, got \(arguments.count)",
        location: location)
    }
    callDepth += 1
    defer { callDepth -= 1 }
    if callDepth > EvaluationLimits.maxCallDepth {
      throw EvaluationError(
        message: "function calls nested deeper than \(EvaluationLimits.maxCallDepth) (in '\(function.name)')",
        location: location, exhausted: true)
    }
    var inner = Frame(
      locals: Dictionary(uniqueKeysWithValues: zip(function.parameters, arguments)), scope: declaringScope)
    for (name, value) in function.lets {
      inner.locals[name] = try eval(value, inner)
    }
    return try eval(function.body, inner)
  }
}
