import Larder
import LarderHTTP

/// A count in a request (a size, an offset, a generation): decimal digits only, no sign, no
/// exponent, within 64 bits. The one parser of every protocol's counts: query parameters,
/// `Upload-Offset`/`Upload-Length`, `X-Goog-Upload-*` headers, `Content-Range` parts, and
/// generations written as JSON strings.
///
///     DecimalCount.parse("1024")   // 1024
///     DecimalCount.parse("+1")     // nil
enum DecimalCount {
  /// The count `text` spells, or nil (empty, anything but digits, or beyond 64 bits).
  static func parse(_ text: some StringProtocol) -> Int64? {
    guard isDigits(text), text.utf8.count <= 19 else { return nil }
    return Int64(text)
  }

  /// A header's count: as ``parse(_:)``, ignoring spaces around it.
  static func parse(header text: String) -> Int64? {
    parse(text.trimmingCharacters(in: .whitespaces))
  }

  /// Whether `text` is one or more decimal digits (whatever their number).
  static func isDigits(_ text: some StringProtocol) -> Bool {
    !text.isEmpty && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
  }

  /// The query parameter `name` as a count; nil when absent.
  /// - Throws: ``LarderError/invalidArgument(_:)`` naming the parameter.
  static func query(_ request: HTTPRequest, _ name: String) throws -> Int64? {
    guard let text = request.queryValue(name) else { return nil }
    guard let n = parse(text) else {
      throw LarderError.invalidArgument("\(name) must be a non-negative integer, got '\(text.prefix(40))'")
    }
    return n
  }
}
