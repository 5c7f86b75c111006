/// The token of an `Authorization` header: `Bearer <token>` or `Firebase <token>` (the scheme the
/// Firebase SDKs send), scheme matched case-insensitively; nil for any other scheme or an empty token.
///
/// ```swift
/// parseAuthorizationHeader("bearer eyJ…")   // "eyJ…"
/// parseAuthorizationHeader("Basic dXNlcg==") // nil
/// ```
public func parseAuthorizationHeader(_ value: String) -> String? {
  let trimmed = value.trimmingSpacesAndTabs()
  guard let space = trimmed.firstIndex(where: { $0 == " " || $0 == "\t" }) else { return nil }
  let scheme = trimmed[..<space].lowercased()
  guard scheme == "bearer" || scheme == "firebase" else { return nil }
  let token = trimmed[space...].trimmingSpacesAndTabs()
  guard !token.isEmpty, !token.contains(where: { $0 == " " || $0 == "\t" }) else { return nil }
  return String(token)
}

extension StringProtocol {
  fileprivate func trimmingSpacesAndTabs() -> Substring {
    let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
    guard let start = firstIndex(where: { !isBlank($0) }), let end = lastIndex(where: { !isBlank($0) }) else {
      return Substring()
    }
    return Substring(self[start...end])
  }
}
