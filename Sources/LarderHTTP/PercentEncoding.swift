/// Strict RFC 3986 percent-decoding and -encoding.
///
/// Strict means: a `%` must be followed by two hex digits, and the decoded bytes must be UTF-8.
/// `+` is a literal plus (not a space): this is an API, not an HTML form, and Swift's
/// `URLComponents` leaves `+` unencoded in query values.
/// ```swift
/// try PercentEncoding.decode("users%2Fu1")   // "users/u1"
/// try PercentEncoding.decode("%zz")          // throws .malformedPercentEncoding
/// ```
public enum PercentEncoding {
  /// Decodes `%HH` escapes.
  /// - Throws: `HTTPRequestError.malformedPercentEncoding` or `.invalidUTF8`.
  public static func decode<S: StringProtocol>(_ text: S) throws(HTTPRequestError) -> String {
    let utf8 = text.utf8
    guard utf8.contains(0x25) else { return String(text) }
    var out = [UInt8]()
    out.reserveCapacity(utf8.count)
    var i = utf8.startIndex
    while i != utf8.endIndex {
      let byte = utf8[i]
      if byte == 0x25 {
        let h = utf8.index(after: i)
        guard h != utf8.endIndex else { throw .malformedPercentEncoding(String(text)) }
        let l = utf8.index(after: h)
        guard l != utf8.endIndex, let hi = hexValue(utf8[h]), let lo = hexValue(utf8[l]) else {
          throw .malformedPercentEncoding(String(text))
        }
        out.append(hi << 4 | lo)
        i = utf8.index(after: l)
      } else {
        out.append(byte)
        i = utf8.index(after: i)
      }
    }
    guard let string = String(validating: out, as: UTF8.self) else { throw .invalidUTF8(String(text)) }
    return string
  }

  /// Encodes everything except RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`),
  /// so the result is safe as one path segment or one query value (`/` becomes `%2F`).
  public static func encodeComponent(_ text: String) -> String {
    let hex = Array("0123456789ABCDEF".utf8)
    var out = [UInt8]()
    out.reserveCapacity(text.utf8.count)
    for b in text.utf8 {
      switch b {
      case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E: out.append(b)
      default:
        out.append(0x25)
        out.append(hex[Int(b >> 4)])
        out.append(hex[Int(b & 0x0F)])
      }
    }
    return String(decoding: out, as: UTF8.self)
  }

  static func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case 0x30...0x39: c - 0x30
    case 0x41...0x46: c - 0x41 + 10
    case 0x61...0x66: c - 0x61 + 10
    default: nil
    }
  }
}

/// One `name=value` pair of a query string, both percent-decoded.
public struct HTTPQueryItem: Sendable, Equatable {
  public var name: String
  /// `nil` for a bare `name` without `=`; `""` for `name=`.
  public var value: String?
  public init(name: String, value: String?) {
    self.name = name
    self.value = value
  }

  /// Parses a raw query string (without the `?`), decoding strictly; empty pieces (`a=1&&b=2`) are skipped.
  /// - Throws: `HTTPRequestError.malformedPercentEncoding` or `.invalidUTF8`.
  public static func parse(_ rawQuery: Substring) throws(HTTPRequestError) -> [HTTPQueryItem] {
    var items: [HTTPQueryItem] = []
    let pieces = rawQuery.splitASCII(on: 0x26, omittingEmpty: true) ?? rawQuery.split(separator: "&")
    for piece in pieces {
      let ascii = piece.utf8.allSatisfy { $0 < 0x80 }
      if let eq = ascii ? piece.utf8.firstIndex(of: 0x3D) : piece.firstIndex(of: "=") {
        let name = try PercentEncoding.decode(piece[..<eq])
        let value = try PercentEncoding.decode(piece[(ascii ? piece.utf8.index(after: eq) : piece.index(after: eq))...])
        items.append(HTTPQueryItem(name: name, value: value))
      } else {
        items.append(HTTPQueryItem(name: try PercentEncoding.decode(piece), value: nil))
      }
    }
    return items
  }
}

extension Substring {
  /// The pieces between `separator` bytes, found byte by byte; nil unless all of it is ASCII.
  ///
  /// Every request's path and query are split: `split(separator:)` walks grapheme clusters,
  /// which showed in profiles. For ASCII text (every valid target) both give the same pieces.
  /// The bytes are scanned in place (index arithmetic on the view only once per piece); a
  /// text that is not contiguous UTF-8 (never one parsed from the wire) is scanned in a copy.
  func splitASCII(on separator: UInt8, omittingEmpty: Bool) -> [Substring]? {
    let bytes = utf8
    let scanned = bytes.withContiguousStorageIfAvailable { raw -> [Substring]? in
      var pieces: [Substring] = []
      var start = 0
      var startIndex = bytes.startIndex
      for i in 0...raw.count {
        if i < raw.count {
          guard raw[i] < 0x80 else { return nil }
          guard raw[i] == separator else { continue }
        }
        if !omittingEmpty || start != i {
          pieces.append(self[startIndex..<bytes.index(startIndex, offsetBy: i - start)])
        }
        if i < raw.count {
          startIndex = bytes.index(startIndex, offsetBy: i + 1 - start)
          start = i + 1
        }
      }
      return pieces
    }
    if let scanned { return scanned }
    var native = String(self)
    native.makeContiguousUTF8()
    return native[...].splitASCII(on: separator, omittingEmpty: omittingEmpty)
  }
}
