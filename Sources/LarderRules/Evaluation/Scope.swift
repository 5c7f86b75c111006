/// Variables and functions visible in one `match` block (wildcards bound for this request),
/// chained to the enclosing block. Built per request and never shared across threads.
final class Scope {
  let parent: Scope?
  let variables: [String: RuleValue]
  let functions: [String: FunctionDecl]

  init(parent: Scope?, variables: [String: RuleValue], functions: [String: FunctionDecl]) {
    self.parent = parent
    self.variables = variables
    self.functions = functions
  }

  func variable(_ name: String) -> RuleValue? {
    var scope: Scope? = self
    while let s = scope {
      if let v = s.variables[name] { return v }
      scope = s.parent
    }
    return nil
  }

  /// The function and the scope it was declared in (which its body sees).
  func function(_ name: String) -> (FunctionDecl, Scope)? {
    var scope: Scope? = self
    while let s = scope {
      if let f = s.functions[name] { return (f, s) }
      scope = s.parent
    }
    return nil
  }
}

@available(*, unavailable) extension Scope: Sendable {}

/// One activation: a function's parameters and `let`s (empty at the top of a condition).
struct Frame {
  var locals: [String: RuleValue]
  var scope: Scope
}
