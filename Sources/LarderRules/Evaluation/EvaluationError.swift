/// Why an expression could not produce a value. Any such error makes its `allow` condition
/// false (Firebase semantics); `exhausted` errors also stop the whole request, since the
/// budget is per request.
struct EvaluationError: Error, Sendable {
  var message: String
  var location: SourceLocation
  /// True when a step, depth or size budget ran out: `||`/`&&` must not absorb it.
  var exhausted: Bool = false
}

/// Runtime limits, modelled on Firebase's published caps.
enum EvaluationLimits {
  /// Expression evaluations per request, across all candidate rules.
  static let maxSteps = 10_000
  /// Nested user function calls.
  static let maxCallDepth = 20
  /// Nested evaluator frames (expression height times call depth, capped lower still).
  static let maxEvaluationDepth = 1_000
  /// Largest string an expression may build.
  static let maxStringBytes = 8 << 20
  /// Largest list or map an expression may build.
  static let maxCollectionCount = 100_000
  /// Longest object name considered; longer names are denied without evaluation.
  static let maxObjectNameBytes = 8_192
  /// Most path segments considered; deeper names are denied without evaluation.
  static let maxPathSegments = 1_024
}
