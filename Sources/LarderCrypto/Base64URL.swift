/// Strict base64url (RFC 4648 §5) without padding, as JOSE uses it (RFC 7515 §2).
///
/// ```swift
/// Base64URL.encode([0xfb, 0xff])   // "-_8"
/// Base64URL.decode("-_8")          // [0xfb, 0xff]
/// ```
/// Decoding is deliberately strict: padding, whitespace, the standard alphabet's `+` and `/`, a
/// length of 4n+1 and non-zero unused trailing bits are all refused, so every byte string has exactly
/// one accepted spelling and a token cannot be altered without changing its signed text.
public enum Base64URL {
  private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

  private static let reverse: [UInt8] = {
    var table = [UInt8](repeating: 0xff, count: 256)
    for (index, char) in alphabet.enumerated() { table[Int(char)] = UInt8(index) }
    return table
  }()

  /// Encodes bytes as unpadded base64url.
  public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
    let input = Array(bytes)
    var out = [UInt8]()
    out.reserveCapacity((input.count * 4 + 2) / 3)
    var i = 0
    while i + 3 <= input.count {
      let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
      out.append(alphabet[Int(n >> 18 & 63)])
      out.append(alphabet[Int(n >> 12 & 63)])
      out.append(alphabet[Int(n >> 6 & 63)])
      out.append(alphabet[Int(n & 63)])
      i += 3
    }
    switch input.count - i {
    case 1:
      let n = UInt32(input[i]) << 16
      out.append(alphabet[Int(n >> 18 & 63)])
      out.append(alphabet[Int(n >> 12 & 63)])
    case 2:
      let n = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
      out.append(alphabet[Int(n >> 18 & 63)])
      out.append(alphabet[Int(n >> 12 & 63)])
      out.append(alphabet[Int(n >> 6 & 63)])
    default:
      break
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// Decodes unpadded base64url; nil for anything that is not its single canonical spelling.
  public static func decode<S: StringProtocol>(_ string: S) -> [UInt8]? {
    decode(utf8: Array(string.utf8))
  }

  /// Decodes unpadded base64url from its UTF-8 bytes; nil when not canonical.
  public static func decode(utf8 chars: [UInt8]) -> [UInt8]? {
    let remainder = chars.count % 4
    guard remainder != 1 else { return nil }
    var out = [UInt8]()
    out.reserveCapacity(chars.count * 3 / 4)
    var accumulator: UInt32 = 0
    var bits = 0
    for char in chars {
      let value = reverse[Int(char)]
      guard value != 0xff else { return nil }
      accumulator = accumulator << 6 | UInt32(value)
      bits += 6
      if bits >= 8 {
        bits -= 8
        out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
        accumulator &= (1 << UInt32(bits)) - 1
      }
    }
    // Leftover bits (2 or 4) must be zero, or two spellings would decode to the same bytes.
    guard accumulator == 0 else { return nil }
    return out
  }
}
