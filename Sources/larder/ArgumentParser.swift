import Foundation

/// Bad usage: printed with the command's usage, exit status 2.
struct UsageError: Error, CustomStringConvertible {
  let description: String
  init(_ message: String) { description = message }
}

/// A failure while running: printed as one `larder: error: …` line, exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
  let description: String
  init(_ message: String) { description = message }
}

/// A small hand-written parser for `--flag`, `--option value`, `--option=value` and positionals.
///
/// Commands pull what they know out of it; ``finish()`` then rejects anything left over.
struct Arguments {
  private var tokens: [String]
  private var positionals: [String] = []

  init(_ tokens: [String]) {
    var rest: [String] = []
    var pos: [String] = []
    var onlyPositional = false
    for t in tokens {
      if onlyPositional {
        pos.append(t)
      } else if t == "--" {
        onlyPositional = true
      } else if t.hasPrefix("-") && t.count > 1 {
        rest.append(t)
      } else {
        rest.append(t)
      }
    }
    self.tokens = rest
    self.positionals = pos
  }

  var wantsHelp: Bool { tokens.contains("--help") || tokens.contains("-h") }

  /// True if `--name` was given (and removes it).
  mutating func flag(_ names: String...) -> Bool {
    var found = false
    tokens.removeAll { t in
      if names.contains(t) {
        found = true
        return true
      }
      return false
    }
    return found
  }

  /// The values of every `--name value` / `--name=value` (removing them).
  mutating func options(_ name: String) throws(UsageError) -> [String] {
    var values: [String] = []
    var i = 0
    while i < tokens.count {
      let t = tokens[i]
      if t == name {
        guard i + 1 < tokens.count else { throw UsageError("\(name) needs a value") }
        values.append(tokens[i + 1])
        tokens.removeSubrange(i...(i + 1))
      } else if t.hasPrefix(name + "=") {
        values.append(String(t.dropFirst(name.count + 1)))
        tokens.remove(at: i)
      } else {
        i += 1
      }
    }
    return values
  }

  /// The value of `--name`, the last one if repeated.
  mutating func option(_ name: String) throws(UsageError) -> String? {
    try options(name).last
  }

  /// The remaining positional arguments, in order; fails on unknown options.
  mutating func finish(positionals range: ClosedRange<Int>) throws(UsageError) -> [String] {
    var pos: [String] = []
    for t in tokens {
      if t.hasPrefix("-") && t.count > 1 && t != "-" { throw UsageError("unknown option '\(t)'") }
      pos.append(t)
    }
    pos += positionals
    guard range.contains(pos.count) else {
      if pos.count < range.lowerBound { throw UsageError("missing argument") }
      throw UsageError("unexpected argument '\(pos[range.upperBound])'")
    }
    return pos
  }
}

/// Parses sizes like `5GiB`, `10MB`, `1024`.
func parseSize(_ text: String) throws(UsageError) -> Int64 {
  let units: [(String, Int64)] = [
    ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40),
    ("KB", 1000), ("MB", 1_000_000), ("GB", 1_000_000_000), ("TB", 1_000_000_000_000),
    ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("B", 1),
  ]
  for (suffix, factor) in units where text.hasSuffix(suffix) {
    guard let n = Int64(text.dropLast(suffix.count)), n >= 0 else { break }
    let (product, overflow) = n.multipliedReportingOverflow(by: factor)
    guard !overflow else { throw UsageError("size '\(text)' is too large") }
    return product
  }
  guard let n = Int64(text), n >= 0 else { throw UsageError("'\(text)' is not a size (e.g. 1024, 10MiB, 5GiB)") }
  return n
}

/// Parses durations like `24h`, `30m`, `0s`, `2d`, `90`.
func parseDuration(_ text: String) throws(UsageError) -> Duration {
  let units: [(String, Int64)] = [("ms", 0), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
  for (suffix, factor) in units where text.hasSuffix(suffix) {
    guard let n = Int64(text.dropLast(suffix.count)), n >= 0 else { break }
    if suffix == "ms" { return .milliseconds(n) }
    let (seconds, overflow) = n.multipliedReportingOverflow(by: factor)
    guard !overflow else { throw UsageError("duration '\(text)' is too large") }
    return .seconds(seconds)
  }
  guard let n = Int64(text), n >= 0 else { throw UsageError("'\(text)' is not a duration (e.g. 30s, 15m, 24h)") }
  return .seconds(n)
}

/// Splits `BUCKET/NAME` at the first slash.
func parseObjectPath(_ text: String) throws(UsageError) -> (bucket: String, name: String) {
  guard let slash = text.firstIndex(of: "/"), slash != text.startIndex, text.index(after: slash) != text.endIndex else {
    throw UsageError("'\(text)' is not BUCKET/NAME")
  }
  return (String(text[..<slash]), String(text[text.index(after: slash)...]))
}
