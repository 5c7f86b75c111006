import Foundation

/// What commands print: JSON, the one error line, notes, byte counts.
enum Output {
  static func json<T: Encodable>(_ value: T) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    return String(decoding: try encoder.encode(value), as: UTF8.self)
  }

  /// Writes the one `larder: error: …` line. Control characters in the message (an object name
  /// given with a newline, say) are escaped, so the error stays on one line and cannot drive the
  /// terminal.
  static func error(_ message: String) {
    FileHandle.standardError.write(Data("larder: error: \(escapingControlCharacters(message))\n".utf8))
  }

  /// `\n`, `\r`, `\t` and `\u{XX}` for C0 and C1 control characters; everything else as is.
  static func escapingControlCharacters(_ text: String) -> String {
    var out = String.UnicodeScalarView()
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\n": out.append(contentsOf: "\\n".unicodeScalars)
      case "\r": out.append(contentsOf: "\\r".unicodeScalars)
      case "\t": out.append(contentsOf: "\\t".unicodeScalars)
      case _ where scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value):
        let hex = String(scalar.value, radix: 16)
        out.append(contentsOf: "\\u{\(hex.count < 2 ? "0" + hex : hex)}".unicodeScalars)
      default: out.append(scalar)
      }
    }
    return String(out)
  }

  static func note(_ message: String) {
    FileHandle.standardError.write(Data("\(message)\n".utf8))
  }

  static func bytes(_ n: Int64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(n)
    var unit = 0
    while value >= 1024 && unit < units.count - 1 {
      value /= 1024
      unit += 1
    }
    return unit == 0 ? "\(n) B" : String(format: "%.1f %@", value, units[unit])
  }
}
