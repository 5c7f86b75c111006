/// The JWS algorithms Larder accepts. `none` and everything else are refused; `alg` values are
/// compared exactly, as RFC 7515 §4.1.1 makes them case-sensitive.
public enum JWTAlgorithm: String, Sendable, CaseIterable {
  case hs256 = "HS256"
  case rs256 = "RS256"
  case es256 = "ES256"
}
