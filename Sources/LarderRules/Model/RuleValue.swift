import Foundation

/// A value in the rules language.
///
/// `Equatable` here is structural (Swift's); the language's own `==` (where `1 == 1.0`)
/// lives in the evaluator.
public indirect enum RuleValue: Sendable, Equatable {
  case null
  case bool(Bool)
  case int(Int64)
  case float(Double)
  case string(String)
  case bytes([UInt8])
  case list([RuleValue])
  case map([String: RuleValue])
  case timestamp(Date)
  /// A span of time in nanoseconds (may be negative).
  case duration(nanoseconds: Int64)
  /// A path as its segments, e.g. `/b/bkt/o/a/b` is `["b", "bkt", "o", "a", "b"]`.
  case path([String])
  /// A value not known yet: a field of `request.resource` that only the content tells, asked
  /// about before the body has arrived (``RuleResource/unknownFields``). Whatever is computed
  /// from it is unknown too, except where the rest decides alone (`true || unknown` is true,
  /// `false && unknown` false, `unknown in []` false); an `allow` whose condition ends up
  /// unknown leaves the request undecided (``RuleDecision/undecided``).
  case unknown

  /// The language's type name, as `is` and error messages use it.
  public var typeName: String {
    switch self {
    case .null: "null"
    case .bool: "bool"
    case .int: "int"
    case .float: "float"
    case .string: "string"
    case .bytes: "bytes"
    case .list: "list"
    case .map: "map"
    case .timestamp: "timestamp"
    case .duration: "duration"
    case .path: "path"
    case .unknown: "unknown"
    }
  }
}

extension RuleValue {
  var isUnknown: Bool {
    if case .unknown = self { return true }
    return false
  }
}
