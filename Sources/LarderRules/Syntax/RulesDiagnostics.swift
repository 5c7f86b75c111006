/// One problem found in a rules file, with enough context to print it like a compiler.
///
///     storage.rules:3:20: error: expected ';' after the allow condition
///         allow read: if true
///                            ^
public struct Diagnostic: Sendable, Equatable, CustomStringConvertible {
  public var fileName: String
  /// 1-based line.
  public var line: Int
  /// 1-based column, counted in Unicode scalars.
  public var column: Int
  public var message: String
  /// The offending source line followed by a caret line (empty when the line is unknown).
  public var snippet: String

  public init(fileName: String, line: Int, column: Int, message: String, snippet: String = "") {
    self.fileName = fileName
    self.line = line
    self.column = column
    self.message = message
    self.snippet = snippet
  }

  /// `file:line:col: error: message`, then the snippet.
  public var description: String {
    let head = "\(fileName):\(line):\(column): error: \(message)"
    return snippet.isEmpty ? head : head + "\n" + snippet
  }
}

/// The error thrown by `RuleSet.parse`: every diagnostic found, in source order.
public struct RulesDiagnostics: Error, Sendable, Equatable, CustomStringConvertible {
  public var diagnostics: [Diagnostic]

  public init(_ diagnostics: [Diagnostic]) { self.diagnostics = diagnostics }

  public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}

extension Diagnostic {
  /// Builds a diagnostic with a caret snippet cut from `source` bytes.
  static func at(
    _ location: SourceLocation, _ message: String, fileName: String, source: [UInt8]
  ) -> Diagnostic {
    Diagnostic(
      fileName: fileName, line: location.line, column: location.column, message: message,
      snippet: caretSnippet(source: source, location: location))
  }

  /// The source line (truncated to keep logs small) and a caret under the column.
  static func caretSnippet(source: [UInt8], location: SourceLocation) -> String {
    var start = min(location.offset, source.count)
    while start > 0 && source[start - 1] != UInt8(ascii: "\n") { start -= 1 }
    var end = min(location.offset, source.count)
    while end < source.count && source[end] != UInt8(ascii: "\n") && end - start < 400 { end += 1 }
    var lineText = String(decoding: source[start..<end], as: UTF8.self)
    lineText = String(lineText.unicodeScalars.map { $0 == "\t" ? " " : Character($0) })
    let caretColumn = min(location.column - 1, lineText.unicodeScalars.count)
    return "    " + lineText + "\n    " + String(repeating: " ", count: max(0, caretColumn)) + "^"
  }
}

/// A position in a rules source file.
struct SourceLocation: Sendable, Equatable {
  /// Byte offset into the UTF-8 source.
  var offset: Int
  var line: Int
  var column: Int

  static let unknown = SourceLocation(offset: 0, line: 0, column: 0)
}
