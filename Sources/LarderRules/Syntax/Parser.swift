/// Recursive-descent parser for storage rules. Nesting is bounded (expression height and match
/// depth) so that neither parsing nor evaluation can exhaust the stack on hostile input.
struct Parser {
  /// Deepest expression tree accepted; also bounds evaluator recursion per function frame.
  static let maxExpressionHeight = 128
  /// Deepest `match` nesting accepted.
  static let maxMatchDepth = 32

  private var lexer: Lexer
  private var token: Token
  private let fileName: String
  private var depth = 0

  init(source: [UInt8], fileName: String) throws(SyntaxError) {
    lexer = Lexer(source: source)
    self.fileName = fileName
    token = Token(kind: .end, location: lexer.location)
    token = try lexer.next()
  }

  /// The parsed file: language version and a root block (the `service` body).
  struct File {
    var version: Int
    var root: MatchBlock
  }

  // MARK: - Token helpers

  private mutating func advance() throws(SyntaxError) { token = try lexer.next() }

  private func fail(_ message: String, at location: SourceLocation? = nil) -> SyntaxError {
    SyntaxError(location: location ?? token.location, message: message)
  }

  private var tokenText: String {
    switch token.kind {
    case .identifier(let s): "'\(s)'"
    case .int(let v): "'\(v)'"
    case .float(let v): "'\(v)'"
    case .string: "a string"
    case .punct(let p): "'\(p)'"
    case .end: "end of file"
    }
  }

  private mutating func expectPunct(_ p: String, _ context: String) throws(SyntaxError) {
    guard token.isPunct(p) else { throw fail("expected '\(p)' \(context), found \(tokenText)") }
    try advance()
  }

  private mutating func identifier(_ context: String) throws(SyntaxError) -> String {
    guard case .identifier(let name) = token.kind else {
      throw fail("expected \(context), found \(tokenText)")
    }
    try advance()
    return name
  }

  // MARK: - Declarations

  mutating func parseFile() throws(SyntaxError) -> File {
    var version = 1
    if token.isKeyword("rules_version") {
      try advance()
      try expectPunct("=", "after 'rules_version'")
      guard case .string(let v) = token.kind else { throw fail("expected a version string such as '2'") }
      guard v == "1" || v == "2" else { throw fail("unsupported rules_version '\(v)' (expected '1' or '2')") }
      version = v == "2" ? 2 : 1
      try advance()
      try expectPunct(";", "after the rules_version")
    }
    guard token.isKeyword("service") else {
      throw fail("expected 'service firebase.storage', found \(tokenText)")
    }
    try advance()
    let serviceLocation = token.location
    var name = try identifier("a service name")
    while token.isPunct(".") {
      try advance()
      name += "." + (try identifier("a service name"))
    }
    guard name == "firebase.storage" else {
      throw fail("unsupported service '\(name)' (expected 'firebase.storage')", at: serviceLocation)
    }
    try expectPunct("{", "to open the service body")
    let root = try parseBlockBody(pattern: [], matchDepth: 0, isService: true)
    guard case .end = token.kind else {
      throw fail("expected end of file after the service block, found \(tokenText)")
    }
    return File(version: version, root: root)
  }

  /// Parses declarations up to and including the closing `}`.
  private mutating func parseBlockBody(
    pattern: [PathPatternSegment], matchDepth: Int, isService: Bool
  ) throws(SyntaxError) -> MatchBlock {
    var block = MatchBlock(pattern: pattern, functions: [:], allows: [], children: [])
    while true {
      if token.isPunct("}") {
        try advance()
        return block
      }
      if case .end = token.kind { throw fail("expected '}' before end of file") }
      if token.isKeyword("match") {
        let matchLocation = token.location
        guard matchDepth < Parser.maxMatchDepth else {
          throw fail("match blocks nested deeper than \(Parser.maxMatchDepth)", at: matchLocation)
        }
        let segments = try lexer.matchPath()
        try checkPattern(segments, at: matchLocation)
        try advance()
        try expectPunct("{", "after the match path")
        block.children.append(
          try parseBlockBody(pattern: segments, matchDepth: matchDepth + 1, isService: false))
      } else if token.isKeyword("function") {
        let function = try parseFunction()
        guard block.functions[function.name] == nil else {
          throw fail("function '\(function.name)' is already declared in this scope", at: function.location)
        }
        block.functions[function.name] = function
      } else if token.isKeyword("allow") {
        if isService { throw fail("'allow' must be inside a 'match' block") }
        block.allows.append(try parseAllow())
      } else {
        throw fail("expected 'match', 'allow', 'function' or '}', found \(tokenText)")
      }
    }
  }

  private func checkPattern(_ segments: [PathPatternSegment], at location: SourceLocation) throws(SyntaxError)
  {
    var names = Set<String>()
    for (i, segment) in segments.enumerated() {
      switch segment {
      case .literal: continue
      case .variable(let name), .recursive(let name):
        if case .recursive = segment, i != segments.count - 1 {
          throw fail(
            "recursive wildcard '{\(name)=**}' must be the last segment of a match path", at: location)
        }
        guard names.insert(name).inserted else {
          throw fail("wildcard '\(name)' appears twice in one match path", at: location)
        }
      }
    }
  }

  private mutating func parseAllow() throws(SyntaxError) -> AllowRule {
    let location = token.location
    try advance()
    var operations = Set<RuleOperation>()
    repeat {
      if token.isPunct(",") { try advance() }
      let methodLocation = token.location
      let method = try identifier("a method (read, write, get, list, create, update, delete)")
      guard let expanded = RuleOperation.expand(method) else {
        throw fail(
          "unknown method '\(method)' (expected read, write, get, list, create, update or delete)",
          at: methodLocation)
      }
      operations.formUnion(expanded)
    } while token.isPunct(",")
    var condition: Expr?
    if token.isPunct(":") {
      try advance()
      guard token.isKeyword("if") else { throw fail("expected 'if' after ':', found \(tokenText)") }
      try advance()
      condition = try parseExpression()
    }
    try expectPunct(";", "after the allow rule")
    return AllowRule(
      operations: operations, condition: condition,
      origin: "\(fileName):\(location.line):\(location.column)")
  }

  private mutating func parseFunction() throws(SyntaxError) -> FunctionDecl {
    let location = token.location
    try advance()
    let name = try identifier("a function name")
    try expectPunct("(", "after the function name")
    var parameters: [String] = []
    if !token.isPunct(")") {
      while true {
        let parameterLocation = token.location
        let parameter = try identifier("a parameter name")
        guard !parameters.contains(parameter) else {
          throw fail("duplicate parameter '\(parameter)'", at: parameterLocation)
        }
        parameters.append(parameter)
        if token.isPunct(",") { try advance() } else { break }
      }
    }
    try expectPunct(")", "after the parameters")
    try expectPunct("{", "to open the function body")
    var lets: [(String, Expr)] = []
    while token.isKeyword("let") {
      try advance()
      let variable = try identifier("a variable name after 'let'")
      try expectPunct("=", "after the let variable")
      lets.append((variable, try parseExpression()))
      try expectPunct(";", "after the let statement")
    }
    guard token.isKeyword("return") else {
      throw fail("expected 'return' in function '\(name)', found \(tokenText)")
    }
    try advance()
    let body = try parseExpression()
    if token.isPunct(";") { try advance() }
    try expectPunct("}", "to close function '\(name)'")
    return FunctionDecl(name: name, parameters: parameters, lets: lets, body: body, location: location)
  }

  // MARK: - Expressions

  private func node(_ kind: Expr.Kind, _ location: SourceLocation, _ children: Expr...) throws(SyntaxError)
    -> Expr
  {
    try node(kind, location, children: children)
  }

  private func node(_ kind: Expr.Kind, _ location: SourceLocation, children: [Expr]) throws(SyntaxError)
    -> Expr
  {
    let height = 1 + (children.map(\.height).max() ?? 0)
    guard height <= Parser.maxExpressionHeight else {
      throw fail("expression nested too deeply (limit \(Parser.maxExpressionHeight))", at: location)
    }
    return Expr(kind: kind, location: location, height: height)
  }

  mutating func parseExpression() throws(SyntaxError) -> Expr {
    depth += 1
    defer { depth -= 1 }
    guard depth <= Parser.maxExpressionHeight else {
      throw fail("expression nested too deeply (limit \(Parser.maxExpressionHeight))")
    }
    let condition = try parseBinary(level: 0)
    guard token.isPunct("?") else { return condition }
    let location = token.location
    try advance()
    let whenTrue = try parseExpression()
    try expectPunct(":", "in the conditional expression")
    let whenFalse = try parseExpression()
    return try node(.ternary(condition, whenTrue, whenFalse), location, condition, whenTrue, whenFalse)
  }

  private static let levels: [[String: BinaryOperator]] = [
    ["||": .or],
    ["&&": .and],
    [
      "==": .equal, "!=": .notEqual, "<": .less, "<=": .lessEqual, ">": .greater, ">=": .greaterEqual,
      "in": .in,
    ],
    ["+": .add, "-": .subtract],
    ["*": .multiply, "/": .divide, "%": .remainder],
  ]

  private func binaryOperator(level: Int) -> BinaryOperator? {
    switch token.kind {
    case .punct(let p): Parser.levels[level][p]
    case .identifier("in"): Parser.levels[level]["in"]
    default: nil
    }
  }

  private mutating func parseBinary(level: Int) throws(SyntaxError) -> Expr {
    if level == Parser.levels.count { return try parseUnary() }
    var lhs = try parseBinary(level: level + 1)
    while true {
      if level == 2, token.isKeyword("is") {
        let location = token.location
        try advance()
        let typeName = try identifier("a type name after 'is'")
        let known = [
          "null", "bool", "int", "float", "number", "string", "bytes", "list", "map", "timestamp", "duration",
          "path",
        ]
        guard known.contains(typeName) else { throw fail("unknown type '\(typeName)'", at: location) }
        lhs = try node(.isType(lhs, typeName), location, lhs)
        continue
      }
      guard let op = binaryOperator(level: level) else { return lhs }
      let location = token.location
      try advance()
      let rhs = try parseBinary(level: level + 1)
      lhs = try node(.binary(op, lhs, rhs), location, lhs, rhs)
    }
  }

  private mutating func parseUnary() throws(SyntaxError) -> Expr {
    depth += 1
    defer { depth -= 1 }
    guard depth <= Parser.maxExpressionHeight else {
      throw fail("expression nested too deeply (limit \(Parser.maxExpressionHeight))")
    }
    let location = token.location
    if token.isPunct("!") || token.isPunct("-") {
      let op: UnaryOperator = token.isPunct("!") ? .not : .negate
      try advance()
      let operand = try parseUnary()
      if op == .negate, case .literal(.int(let v)) = operand.kind {
        return try node(.literal(.int(-v)), location)
      }
      if op == .negate, case .literal(.float(let v)) = operand.kind {
        return try node(.literal(.float(-v)), location)
      }
      return try node(.unary(op, operand), location, operand)
    }
    return try parsePostfix()
  }

  private mutating func parsePostfix() throws(SyntaxError) -> Expr {
    var expr = try parsePrimary()
    while true {
      let location = token.location
      if token.isPunct(".") {
        try advance()
        let name = try identifier("a member name after '.'")
        expr = try node(.member(expr, name), location, expr)
      } else if token.isPunct("[") {
        try advance()
        let index = try parseExpression()
        try expectPunct("]", "to close the index")
        expr = try node(.index(expr, index), location, expr, index)
      } else if token.isPunct("(") {
        try advance()
        let arguments = try parseList(closing: ")")
        expr = try node(.call(expr, arguments), location, children: [expr] + arguments)
      } else {
        return expr
      }
    }
  }

  private mutating func parseList(closing: String) throws(SyntaxError) -> [Expr] {
    var items: [Expr] = []
    while !token.isPunct(closing) {
      items.append(try parseExpression())
      if token.isPunct(",") { try advance() } else { break }
    }
    try expectPunct(closing, "to close the list")
    return items
  }

  private mutating func parsePrimary() throws(SyntaxError) -> Expr {
    let location = token.location
    switch token.kind {
    case .int(let v):
      try advance()
      return try node(.literal(.int(v)), location)
    case .float(let v):
      try advance()
      return try node(.literal(.float(v)), location)
    case .string(let s):
      try advance()
      return try node(.literal(.string(s)), location)
    case .identifier(let name):
      try advance()
      switch name {
      case "true": return try node(.literal(.bool(true)), location)
      case "false": return try node(.literal(.bool(false)), location)
      case "null": return try node(.literal(.null), location)
      default: return try node(.identifier(name), location)
      }
    case .punct("("):
      try advance()
      let inner = try parseExpression()
      try expectPunct(")", "to close the parenthesis")
      return inner
    case .punct("["):
      try advance()
      let items = try parseList(closing: "]")
      return try node(.list(items), location, children: items)
    case .punct("{"):
      try advance()
      var entries: [(String, Expr)] = []
      while !token.isPunct("}") {
        let key: String
        switch token.kind {
        case .string(let s), .identifier(let s): key = s
        default: throw fail("expected a map key, found \(tokenText)")
        }
        try advance()
        try expectPunct(":", "after the map key")
        entries.append((key, try parseExpression()))
        if token.isPunct(",") { try advance() } else { break }
      }
      try expectPunct("}", "to close the map")
      return try node(.map(entries), location, children: entries.map(\.1))
    case .punct("/"):
      throw fail("path literals are not supported in storage rules expressions")
    default:
      throw fail("expected an expression, found \(tokenText)")
    }
  }
}
