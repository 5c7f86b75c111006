/// A token of the rules language.
struct Token: Sendable {
  enum Kind: Sendable, Equatable {
    case identifier(String)
    case int(Int64)
    case float(Double)
    case string(String)
    case punct(String)
    case end
  }

  var kind: Kind
  var location: SourceLocation

  func isPunct(_ p: String) -> Bool { kind == .punct(p) }
  func isKeyword(_ k: String) -> Bool { kind == .identifier(k) }
}

/// A syntax error before it is rendered into a `Diagnostic`.
struct SyntaxError: Error {
  var location: SourceLocation
  var message: String
}

/// Turns UTF-8 source into tokens on demand; `match` paths are scanned by a separate entry
/// point because `/` starts a path there but is division in expressions.
struct Lexer {
  let source: [UInt8]
  private(set) var offset = 0
  private var line = 1
  private var column = 1

  /// Longest string literal accepted; larger files are hostile or mistaken.
  static let maxStringLiteralBytes = 4 << 20

  init(source: [UInt8]) { self.source = source }

  var location: SourceLocation { SourceLocation(offset: offset, line: line, column: column) }

  private func peekByte(_ ahead: Int = 0) -> UInt8? {
    offset + ahead < source.count ? source[offset + ahead] : nil
  }

  private mutating func advance() {
    let b = source[offset]
    offset += 1
    if b == UInt8(ascii: "\n") {
      line += 1
      column = 1
    } else if b & 0xC0 != 0x80 {
      column += 1
    }
  }

  /// Skips whitespace and `//` / `/* */` comments.
  mutating func skipTrivia() throws(SyntaxError) {
    while let b = peekByte() {
      if b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D {
        advance()
      } else if b == UInt8(ascii: "/") && peekByte(1) == UInt8(ascii: "/") {
        while let c = peekByte(), c != UInt8(ascii: "\n") { advance() }
      } else if b == UInt8(ascii: "/") && peekByte(1) == UInt8(ascii: "*") {
        let start = location
        advance()
        advance()
        while true {
          guard let c = peekByte() else {
            throw SyntaxError(location: start, message: "unterminated block comment")
          }
          if c == UInt8(ascii: "*") && peekByte(1) == UInt8(ascii: "/") {
            advance()
            advance()
            break
          }
          advance()
        }
      } else {
        return
      }
    }
  }

  private static func isIdentStart(_ b: UInt8) -> Bool {
    (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == UInt8(ascii: "_")
  }

  private static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

  mutating func next() throws(SyntaxError) -> Token {
    try skipTrivia()
    let start = location
    guard let b = peekByte() else { return Token(kind: .end, location: start) }
    if Lexer.isIdentStart(b) {
      let begin = offset
      while let c = peekByte(), Lexer.isIdentStart(c) || Lexer.isDigit(c) { advance() }
      return Token(
        kind: .identifier(String(decoding: source[begin..<offset], as: UTF8.self)), location: start)
    }
    if Lexer.isDigit(b) { return try number(start) }
    if b == UInt8(ascii: "'") || b == UInt8(ascii: "\"") { return try string(quote: b, start) }
    let two: [String] = ["==", "!=", "<=", ">=", "&&", "||"]
    if let c = peekByte(1) {
      let pair = String(decoding: [b, c], as: UTF8.self)
      if two.contains(pair) {
        advance()
        advance()
        return Token(kind: .punct(pair), location: start)
      }
    }
    let singles = "{}()[];,.:?!=<>+-*/%"
    if b < 0x80, singles.utf8.contains(b) {
      advance()
      return Token(kind: .punct(String(UnicodeScalar(b))), location: start)
    }
    let shown = b < 0x80 && b >= 0x20 ? "'\(UnicodeScalar(b))'" : "byte 0x\(String(b, radix: 16))"
    throw SyntaxError(location: start, message: "unexpected character \(shown)")
  }

  private mutating func number(_ start: SourceLocation) throws(SyntaxError) -> Token {
    let begin = offset
    var isFloat = false
    while let c = peekByte(), Lexer.isDigit(c) { advance() }
    if peekByte() == UInt8(ascii: "."), let d = peekByte(1), Lexer.isDigit(d) {
      isFloat = true
      advance()
      while let c = peekByte(), Lexer.isDigit(c) { advance() }
    }
    if let e = peekByte(), e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
      var ahead = 1
      if let s = peekByte(1), s == UInt8(ascii: "+") || s == UInt8(ascii: "-") { ahead = 2 }
      if let d = peekByte(ahead), Lexer.isDigit(d) {
        isFloat = true
        for _ in 0..<ahead { advance() }
        while let c = peekByte(), Lexer.isDigit(c) { advance() }
      }
    }
    let text = String(decoding: source[begin..<offset], as: UTF8.self)
    if isFloat {
      guard let value = Double(text), value.isFinite else {
        throw SyntaxError(location: start, message: "float literal out of range")
      }
      return Token(kind: .float(value), location: start)
    }
    guard let value = Int64(text) else {
      throw SyntaxError(
        location: start, message: "integer literal '\(text.prefix(30))' does not fit in 64 bits")
    }
    return Token(kind: .int(value), location: start)
  }

  private mutating func string(quote: UInt8, _ start: SourceLocation) throws(SyntaxError) -> Token {
    advance()
    var bytes: [UInt8] = []
    while true {
      guard let c = peekByte(), c != UInt8(ascii: "\n") else {
        throw SyntaxError(location: start, message: "unterminated string literal")
      }
      if bytes.count > Lexer.maxStringLiteralBytes {
        throw SyntaxError(
          location: start, message: "string literal longer than \(Lexer.maxStringLiteralBytes) bytes")
      }
      if c == quote {
        advance()
        break
      }
      if c != UInt8(ascii: "\\") {
        bytes.append(c)
        advance()
        continue
      }
      let escapeLocation = location
      advance()
      guard let e = peekByte() else {
        throw SyntaxError(location: start, message: "unterminated string literal")
      }
      advance()
      switch e {
      case UInt8(ascii: "n"): bytes.append(0x0A)
      case UInt8(ascii: "t"): bytes.append(0x09)
      case UInt8(ascii: "r"): bytes.append(0x0D)
      case UInt8(ascii: "0"): bytes.append(0x00)
      case UInt8(ascii: "\\"), UInt8(ascii: "'"), UInt8(ascii: "\""), UInt8(ascii: "/"): bytes.append(e)
      case UInt8(ascii: "u"):
        var value: UInt32 = 0
        for _ in 0..<4 {
          guard let h = peekByte(), let digit = Lexer.hexValue(h) else {
            throw SyntaxError(location: escapeLocation, message: "\\u needs four hex digits")
          }
          value = value * 16 + digit
          advance()
        }
        guard let scalar = UnicodeScalar(value) else {
          throw SyntaxError(location: escapeLocation, message: "\\u escape is not a Unicode scalar")
        }
        bytes.append(contentsOf: Array(String(Character(scalar)).utf8))
      default:
        throw SyntaxError(
          location: escapeLocation, message: "unknown escape sequence '\\\(UnicodeScalar(e))'")
      }
    }
    return Token(kind: .string(String(decoding: bytes, as: UTF8.self)), location: start)
  }

  private static func hexValue(_ b: UInt8) -> UInt32? {
    switch b {
    case 0x30...0x39: UInt32(b - 0x30)
    case 0x41...0x46: UInt32(b - 0x41 + 10)
    case 0x61...0x66: UInt32(b - 0x61 + 10)
    default: nil
    }
  }

  /// Scans the path after `match`: `/b/{bucket}/o/{rest=**}`.
  mutating func matchPath() throws(SyntaxError) -> [PathPatternSegment] {
    try skipTrivia()
    guard peekByte() == UInt8(ascii: "/") else {
      throw SyntaxError(location: location, message: "expected a path starting with '/' after 'match'")
    }
    var segments: [PathPatternSegment] = []
    while peekByte() == UInt8(ascii: "/") {
      advance()
      let segmentStart = location
      if peekByte() == UInt8(ascii: "{") {
        advance()
        let nameStart = offset
        while let c = peekByte(), Lexer.isIdentStart(c) || Lexer.isDigit(c) { advance() }
        let name = String(decoding: source[nameStart..<offset], as: UTF8.self)
        guard let first = name.utf8.first, Lexer.isIdentStart(first) else {
          throw SyntaxError(location: location, message: "expected a wildcard name after '{'")
        }
        var recursive = false
        if peekByte() == UInt8(ascii: "=") {
          guard peekByte(1) == UInt8(ascii: "*"), peekByte(2) == UInt8(ascii: "*") else {
            throw SyntaxError(location: location, message: "expected '=**' in a recursive wildcard")
          }
          advance()
          advance()
          advance()
          recursive = true
        }
        guard peekByte() == UInt8(ascii: "}") else {
          throw SyntaxError(location: location, message: "expected '}' to close the wildcard '{\(name)'")
        }
        advance()
        segments.append(recursive ? .recursive(name) : .variable(name))
      } else {
        let begin = offset
        while let c = peekByte(), c > 0x20, c != UInt8(ascii: "/"), c != UInt8(ascii: "{"),
          c != UInt8(ascii: "}"),
          c != UInt8(ascii: "(")
        {
          advance()
        }
        guard offset > begin else {
          throw SyntaxError(location: segmentStart, message: "empty path segment in match path")
        }
        segments.append(.literal(String(decoding: source[begin..<offset], as: UTF8.self)))
      }
      if peekByte() != UInt8(ascii: "/") { break }
    }
    return segments
  }
}
