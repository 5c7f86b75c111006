/// Evaluates rule conditions for one request with a shared step budget.
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

  /// Evaluates a condition; a non-boolean result is an error.
  func condition(_ expr: Expr, scope: Scope) throws(EvaluationError) -> Bool {
    let value = try eval(expr, Frame(locals: [:], scope: scope))
    guard case .bool(let b) = value else {
      throw EvaluationError(message: "condition is \(value.typeName), not bool", location: expr.location)
    }
    return b
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
  private func logical(
    isAnd: Bool, _ lhs: Expr, _ rhs: Expr, _ frame: Frame, _ location: SourceLocation
  ) throws(EvaluationError) -> RuleValue {
    let decisive = !isAnd  // the value that short-circuits: false for &&, true for ||
    var leftError: EvaluationError?
    do throws(EvaluationError) {
      let l = try eval(lhs, frame)
      guard case .bool(let b) = l else {
        throw EvaluationError(
          message: "'\(isAnd ? "&&" : "||")' needs bool operands, got \(l.typeName)", location: lhs.location)
      }
      if b == decisive { return .bool(decisive) }
    } catch {
      if error.exhausted { throw error }
      leftError = error
    }
    let r = try eval(rhs, frame)
    guard case .bool(let b) = r else {
      throw EvaluationError(
        message: "'\(isAnd ? "&&" : "||")' needs bool operands, got \(r.typeName)", location: rhs.location)
    }
    if b == decisive { return .bool(decisive) }
    if let leftError { throw leftError }
    return .bool(b)
  }

  private func call(
    _ callee: Expr, _ arguments: [Expr], _ frame: Frame, _ location: SourceLocation
  ) throws(EvaluationError) -> RuleValue {
    func evalArguments() throws(EvaluationError) -> [RuleValue] {
      var values: [RuleValue] = []
      for a in arguments { values.append(try eval(a, frame)) }
      return values
    }
    switch callee.kind {
    case .identifier(let name):
      if let (function, declaringScope) = frame.scope.function(name) {
        return try invoke(function, declaringScope, try evalArguments(), location)
      }
      return try globalFunction(name, try evalArguments(), location)
    case .member(let receiver, let name):
      if case .identifier(let namespace) = receiver.kind,
        ["math", "timestamp", "duration"].contains(namespace),
        frame.locals[namespace] == nil, frame.scope.variable(namespace) == nil
      {
        return try namespaceFunction(namespace, name, try evalArguments(), location)
      }
      let target = try eval(receiver, frame)
      return try method(target, name, try evalArguments(), location)
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
