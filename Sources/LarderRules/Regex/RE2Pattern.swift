internal import CRE2

/// A compiled RE2 pattern. RE2 runs in time linear in the input, so `matches` cannot be
/// turned into a denial of service by a pathological pattern.
///
///     let re = try RE2Pattern("image/.*")
///     re.fullMatch("image/png")   // true
final class RE2Pattern: @unchecked Sendable {
  // @unchecked: the handle is immutable after init and RE2's matching methods are const
  // and documented thread-safe; it is freed only in deinit.
  private let handle: OpaquePointer

  /// Upper bound on RE2's compiled program memory, so a huge pattern cannot eat the heap.
  static let maxProgramMemory: Int64 = 8 << 20

  /// - Throws: `RegexError` with RE2's message when the pattern is invalid.
  init(_ pattern: String) throws(RegexError) {
    var message = [CChar](repeating: 0, count: 256)
    let compiled: OpaquePointer? = pattern.utf8CString.withUnsafeBufferPointer { p in
      cre2_compile(p.baseAddress, p.count - 1, RE2Pattern.maxProgramMemory, &message, message.count)
    }
    guard let compiled else {
      let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
      throw RegexError(message: text)
    }
    handle = compiled
  }

  deinit { cre2_free(handle) }

  func fullMatch(_ text: String) -> Bool {
    var text = text
    return text.withUTF8 { p in cre2_full_match(handle, p.baseAddress, p.count) == 1 }
  }

  /// Byte ranges of successive non-overlapping matches in `utf8`, at most `limit` of them.
  /// An empty match advances by one UTF-8 scalar so the scan always terminates.
  func findAll(in utf8: [UInt8], limit: Int) -> [Range<Int>] {
    var ranges: [Range<Int>] = []
    utf8.withUnsafeBufferPointer { p in
      let base = p.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }
      var start = 0
      while start <= p.count && ranges.count < limit {
        var matchStart = 0
        var matchEnd = 0
        guard cre2_find(handle, base, p.count, start, &matchStart, &matchEnd) == 1 else { break }
        ranges.append(matchStart..<matchEnd)
        if matchEnd > matchStart {
          start = matchEnd
        } else {
          start = matchEnd + 1
          while start < p.count && p[start] & 0xC0 == 0x80 { start += 1 }
        }
      }
    }
    return ranges
  }
}

/// An invalid regular expression, with RE2's explanation.
struct RegexError: Error, Sendable {
  var message: String
}
