/// Writes a command's usage line and `--help` text from its ``CommandConfiguration``, the same
/// table the parser reads.
///
/// ```
/// usage: larder stat BUCKET/NAME [--json] [--data DIR]
///
/// arguments:
///   BUCKET/NAME  the object
/// ...
/// ```
enum HelpFormatter {
  /// The usage line and the option texts wrap at this many columns (a discussion is written
  /// with its own line breaks).
  static let width = 100

  /// `usage: larder put FILE BUCKET/NAME [--content-type TYPE] …`, wrapped under its first word.
  static func usage(_ configuration: CommandConfiguration) -> String {
    let head = "usage: larder \(configuration.name)"
    var words = configuration.positionals.map { $0.isOptional ? "[\($0.name)]" : $0.name }
    func spelled(_ option: Option) -> String {
      option.kind == .flag ? option.name : "\(option.name) \(option.placeholder)"
    }
    for option in configuration.options {
      if let set = configuration.exclusiveSet(of: option) {
        // The set is written once, where its first option stands: `(--rules FILE | --allow-all)`.
        if set.options.first?.name == option.name {
          words.append("(" + set.options.map(spelled).joined(separator: " | ") + ")")
        }
        continue
      }
      words.append(
        (option.isRequired ? spelled(option) : "[\(spelled(option))]")
          + (option.kind == .repeatedValue ? "..." : ""))
    }
    let indent = String(repeating: " ", count: head.count + 1)
    var lines: [String] = []
    var line = head
    for word in words {
      if line.count + 1 + word.count > width && line.count > indent.count {
        lines.append(line)
        line = indent + word
      } else {
        line += " " + word
      }
    }
    lines.append(line)
    return lines.joined(separator: "\n")
  }

  /// The whole `--help`: usage, discussion, arguments, options (with environment variables and
  /// defaults), and `-h, --help`.
  static func help(_ configuration: CommandConfiguration) -> String {
    var text = usage(configuration) + "\n"
    let required = configuration.exclusive.map { "One of \($0.spelled) is required." }
    let discussion = (required + (configuration.discussion.isEmpty ? [] : [configuration.discussion]))
    if !discussion.isEmpty {
      text += "\n" + discussion.joined(separator: "\n") + "\n"
    }
    var rows: [(label: String, help: String, notes: String)] = []
    if !configuration.positionals.isEmpty {
      rows = configuration.positionals.map { ($0.name, $0.help, "") }
      text += "\narguments:\n" + table(rows, labelWidth: labelWidth(configuration))
    }
    rows = configuration.options.map { option in
      let label =
        option.spellings.joined(separator: ", ") + (option.kind == .flag ? "" : " \(option.placeholder)")
      var notes: [String] = []
      if option.isRequired { notes.append("required") }
      if option.kind == .repeatedValue { notes.append("repeatable") }
      if let variable = option.environment {
        notes.append(option.kind == .flag ? "env \(variable)=1" : "env \(variable)")
      }
      if let value = option.defaultValue { notes.append("default \(value)") }
      return (label, option.help, notes.isEmpty ? "" : "(\(notes.joined(separator: "; ")))")
    }
    rows.append(("-h, --help", "show this help", ""))
    text += "\noptions:\n" + table(rows, labelWidth: labelWidth(configuration))
    return text
  }

  /// Wide enough for every label of the command, so its two tables line up.
  private static func labelWidth(_ configuration: CommandConfiguration) -> Int {
    let labels =
      configuration.positionals.map(\.name)
      + configuration.options.map { $0.spellings.joined(separator: ", ") + " " + $0.placeholder }
      + ["-h, --help"]
    return min(labels.map(\.count).max() ?? 0, 32)
  }

  /// Two columns, the text wrapped at ``width`` and the notes (environment, default) kept whole
  /// on its last line or the next; a label too long for its column puts its text on the next line.
  private static func table(_ rows: [(label: String, help: String, notes: String)], labelWidth: Int) -> String
  {
    var text = ""
    let pad = String(repeating: " ", count: 2 + labelWidth + 2)
    for (label, help, notes) in rows {
      var lines = wrap(help, to: width - pad.count)
      if !notes.isEmpty {
        if lines[lines.count - 1].count + 1 + notes.count <= width - pad.count {
          lines[lines.count - 1] += " " + notes
        } else {
          lines.append(notes)
        }
      }
      if label.count > labelWidth {
        text += "  \(label)\n"
      } else {
        text +=
          "  " + label + String(repeating: " ", count: labelWidth - label.count + 2) + lines.removeFirst()
          + "\n"
      }
      for line in lines { text += pad + line + "\n" }
    }
    return text
  }

  /// Breaks at spaces so no line exceeds `columns` (a longer word stands alone); keeps the
  /// text's own line breaks.
  static func wrap(_ text: String, to columns: Int) -> [String] {
    var lines: [String] = []
    for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
      var line = ""
      for word in paragraph.split(separator: " ") {
        if line.isEmpty {
          line = String(word)
        } else if line.count + 1 + word.count > columns {
          lines.append(line)
          line = String(word)
        } else {
          line += " " + word
        }
      }
      lines.append(line)
    }
    return lines
  }
}
