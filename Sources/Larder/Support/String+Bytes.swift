/// Names, uids, prefixes and keys are compared as Firebase and GCS (and the catalog's byte
/// order) compare them: by their exact UTF-8 bytes. Swift's `String ==` and `hashValue` follow
/// canonical equivalence instead ("é" equals "e" + U+0301, "K" equals the Kelvin sign U+212A),
/// so two names the catalog holds apart would meet in a Swift `Dictionary` or `==`.
///
/// ```swift
/// "K".hasSameBytes(as: "\u{212A}")   // false, though "K" == "\u{212A}"
/// ```
extension StringProtocol {
  public func hasSameBytes<Other: StringProtocol>(as other: Other) -> Bool {
    utf8.count == other.utf8.count && utf8.elementsEqual(other.utf8)
  }

  /// Feeds the exact bytes (and their count, so concatenations differ) to `hasher`.
  public func hashBytes(into hasher: inout Hasher) {
    hasher.combine(utf8.count)
    if utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil {
      for byte in utf8 { hasher.combine(byte) }
    }
  }
}

extension Optional where Wrapped == String {
  /// Both nil, or both strings of the same bytes (an upload's owner against the caller's uid).
  public func hasSameBytes(as other: String?) -> Bool {
    switch (self, other) {
    case (nil, nil): true
    case (let a?, let b?): a.hasSameBytes(as: b)
    default: false
    }
  }
}
