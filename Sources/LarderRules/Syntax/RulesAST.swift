/// An expression node with where it came from (for runtime error messages) and its height
/// (bounded by the parser so evaluation recursion is bounded too).
struct Expr: Sendable {
  indirect enum Kind: Sendable {
    case literal(RuleValue)
    case identifier(String)
    case member(Expr, String)
    case index(Expr, Expr)
    case call(Expr, [Expr])
    case unary(UnaryOperator, Expr)
    case binary(BinaryOperator, Expr, Expr)
    case ternary(Expr, Expr, Expr)
    case list([Expr])
    case map([(String, Expr)])
    case isType(Expr, String)
  }

  var kind: Kind
  var location: SourceLocation
  var height: Int
}

enum UnaryOperator: String, Sendable {
  case not = "!"
  case negate = "-"
}

enum BinaryOperator: String, Sendable {
  case or = "||"
  case and = "&&"
  case equal = "=="
  case notEqual = "!="
  case less = "<"
  case lessEqual = "<="
  case greater = ">"
  case greaterEqual = ">="
  case `in` = "in"
  case add = "+"
  case subtract = "-"
  case multiply = "*"
  case divide = "/"
  case remainder = "%"
}

/// One segment of a `match` path.
enum PathPatternSegment: Sendable, Equatable {
  case literal(String)
  case variable(String)
  /// `{name=**}`: the rest of the path (zero or more segments in v2, one or more in v1).
  case recursive(String)
}

/// `function name(params) { let ...; return expr; }`
struct FunctionDecl: Sendable {
  var name: String
  var parameters: [String]
  var lets: [(String, Expr)]
  var body: Expr
  var location: SourceLocation
}

/// `allow methods: if condition;`
struct AllowRule: Sendable {
  var operations: Set<RuleOperation>
  /// nil for an unconditional `allow x;`.
  var condition: Expr?
  /// `file:line:col`, for decisions and logs.
  var origin: String
}

/// `match /path { ... }`
struct MatchBlock: Sendable {
  var pattern: [PathPatternSegment]
  var functions: [String: FunctionDecl]
  var allows: [AllowRule]
  var children: [MatchBlock]
}
