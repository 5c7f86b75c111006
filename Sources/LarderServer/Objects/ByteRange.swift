/// A single `Range: bytes=…` request, resolved against a representation's size.
enum ByteRange: Equatable {
  /// Serve the whole representation (no Range, or one this server ignores).
  case full
  /// Serve `first...last` (inclusive), answered 206.
  case partial(first: Int64, last: Int64)
  /// No byte of the range exists: 416.
  case unsatisfiable

  /// Resolves a `Range` header value (RFC 9110 §14.1.2).
  ///
  /// Only one range is served; a header with several, or a malformed one, is ignored (RFC
  /// 9110 lets a server ignore Range) and the whole content goes out with 200. Numbers too
  /// large for 64 bits stand for "beyond any end".
  static func parse(_ header: String?, size: Int64) -> ByteRange {
    guard let header else { return .full }
    let trimmed = header.trimmingCharacters(in: .whitespaces)
    guard trimmed.lowercased().hasPrefix("bytes=") else { return .full }
    let spec = trimmed.dropFirst(6).trimmingCharacters(in: .whitespaces)
    guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .full }
    let firstText = spec[..<dash].trimmingCharacters(in: .whitespaces)
    let lastText = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
    func number(_ s: String) -> Int64?? {
      // .none: not digits; .some(nil): digits that overflow 64 bits.
      guard DecimalCount.isDigits(s) else { return .none }
      return .some(Int64(s))
    }
    if firstText.isEmpty {
      // Suffix range: the last N bytes.
      guard let n = number(lastText) else { return .full }
      let count = n ?? Int64.max
      guard count > 0, size > 0 else { return .unsatisfiable }
      return .partial(first: max(0, size - count), last: size - 1)
    }
    guard let f = number(firstText) else { return .full }
    guard let first = f, first < size else { return .unsatisfiable }
    if lastText.isEmpty { return .partial(first: first, last: size - 1) }
    guard let l = number(lastText) else { return .full }
    let last = min(l ?? Int64.max, size - 1)
    guard last >= first else { return .full }  // last < first is invalid syntax: ignore
    return .partial(first: first, last: last)
  }
}
