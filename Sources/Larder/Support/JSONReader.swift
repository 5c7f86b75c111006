/// Reads JSON text a value at a time, for documents whose shape the caller knows (the outbox's
/// stored object), without building Foundation's containers. Anything it does not expect
/// makes a call return nil, and the caller falls back to `JSONDecoder`, which reads every JSON
/// and says what was wrong.
/// ```swift
/// var text = #"{"name":"a\/b","size":3}"#
/// text.withUTF8 { utf8 in
///   var json = JSONReader(utf8)
///   _ = json.members { key, json in key == "size" ? json.int64() != nil : json.skip() }
/// }
/// ```
package struct JSONReader {
  private let bytes: UnsafeBufferPointer<UInt8>
  private var at = 0

  package init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

  /// Whether only white space is left.
  package mutating func atEnd() -> Bool {
    skipSpace()
    return at == bytes.count
  }

  /// Reads an object, calling `member` with each key; `member` reads the value and answers
  /// whether it could. False when this is not an object or `member` said false.
  package mutating func members(_ member: (String, inout JSONReader) -> Bool) -> Bool {
    guard take(0x7B) else { return false }
    if take(0x7D) { return true }
    repeat {
      guard let key = string(), take(0x3A), member(key, &self) else { return false }
    } while take(0x2C)
    return take(0x7D)
  }

  /// Reads an array, calling `element` for each element.
  package mutating func elements(_ element: (inout JSONReader) -> Bool) -> Bool {
    guard take(0x5B) else { return false }
    if take(0x5D) { return true }
    repeat {
      guard element(&self) else { return false }
    } while take(0x2C)
    return take(0x5D)
  }

  /// `null` (consumed) or not (nothing consumed).
  package mutating func null() -> Bool {
    skipSpace()
    guard bytes.count - at >= 4, bytes[at] == 0x6E, bytes[at + 1] == 0x75, bytes[at + 2] == 0x6C,
      bytes[at + 3] == 0x6C
    else { return false }
    at += 4
    return true
  }

  package mutating func string() -> String? {
    guard take(0x22) else { return nil }
    let start = at
    while at < bytes.count {
      let byte = bytes[at]
      if byte == 0x22 {
        at += 1
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at - 1]), as: UTF8.self)
      }
      if byte == 0x5C { return escapedString(from: start) }
      if byte < 0x20 { return nil }
      at += 1
    }
    return nil
  }

  /// The rest of a string that holds escapes, from its first byte at `start`.
  private mutating func escapedString(from start: Int) -> String? {
    var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<at]))
    while at < bytes.count {
      let byte = bytes[at]
      at += 1
      switch byte {
      case 0x22: return String(validating: out, as: UTF8.self)
      case 0x5C:
        guard at < bytes.count else { return nil }
        let escaped = bytes[at]
        at += 1
        switch escaped {
        case 0x22, 0x5C, 0x2F: out.append(escaped)
        case 0x62: out.append(0x08)
        case 0x66: out.append(0x0C)
        case 0x6E: out.append(0x0A)
        case 0x72: out.append(0x0D)
        case 0x74: out.append(0x09)
        case 0x75:
          guard var scalar = hex4() else { return nil }
          if (0xD800..<0xDC00).contains(scalar) {
            guard take(0x5C, skippingSpace: false), take(0x75, skippingSpace: false), let low = hex4(),
              (0xDC00..<0xE000).contains(low)
            else { return nil }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
          }
          guard let unicode = Unicode.Scalar(scalar) else { return nil }
          out.append(contentsOf: String(Character(unicode)).utf8)
        default: return nil
        }
      default:
        guard byte >= 0x20 else { return nil }
        out.append(byte)
      }
    }
    return nil
  }

  private mutating func hex4() -> UInt32? {
    guard bytes.count - at >= 4 else { return nil }
    var value: UInt32 = 0
    for _ in 0..<4 {
      let byte = bytes[at]
      at += 1
      let digit: UInt8
      switch byte {
      case 0x30...0x39: digit = byte - 0x30
      case 0x41...0x46: digit = byte - 0x41 + 10
      case 0x61...0x66: digit = byte - 0x61 + 10
      default: return nil
      }
      value = value << 4 | UInt32(digit)
    }
    return value
  }

  /// An integer written without fraction or exponent.
  package mutating func int64() -> Int64? {
    guard let text = numberText(), let value = Int64(text) else { return nil }
    return value
  }

  package mutating func double() -> Double? {
    guard let text = numberText() else { return nil }
    return Double(text)
  }

  private mutating func numberText() -> Substring? {
    skipSpace()
    let start = at
    while at < bytes.count, case let byte = bytes[at],
      (0x30...0x39).contains(byte) || byte == 0x2D || byte == 0x2B || byte == 0x2E || byte == 0x65
        || byte == 0x45
    {
      at += 1
    }
    guard at > start else { return nil }
    return Substring(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self))
  }

  /// Stores `value` (what a read answered) in `into`; whether there was one. For a member
  /// closure: `JSONReader.keep(json.string(), in: &name)`.
  package static func keep<Value>(_ value: Value?, in into: inout Value?) -> Bool {
    into = value
    return value != nil
  }

  /// Reads past one value of any kind.
  package mutating func skip() -> Bool {
    skipSpace()
    guard at < bytes.count else { return false }
    switch bytes[at] {
    case 0x7B: return members { _, json in json.skip() }
    case 0x5B: return elements { json in json.skip() }
    case 0x22: return string() != nil
    case 0x74: return literal("true")
    case 0x66: return literal("false")
    case 0x6E: return null()
    default: return numberText() != nil
    }
  }

  private mutating func literal(_ word: StaticString) -> Bool {
    let count = word.utf8CodeUnitCount
    guard bytes.count - at >= count else { return false }
    for i in 0..<count where bytes[at + i] != word.utf8Start[i] { return false }
    at += count
    return true
  }

  private mutating func take(_ byte: UInt8, skippingSpace: Bool = true) -> Bool {
    if skippingSpace { skipSpace() }
    guard at < bytes.count, bytes[at] == byte else { return false }
    at += 1
    return true
  }

  private mutating func skipSpace() {
    while at < bytes.count, case let byte = bytes[at],
      byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    {
      at += 1
    }
  }
}
