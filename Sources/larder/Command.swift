import Foundation
import Larder

/// A `larder` subcommand: parsed from its arguments in `init`, then `run()`.
protocol Command {
  static var name: String { get }
  static var summary: String { get }
  static var usage: String { get }
  init(_ arguments: inout Arguments) throws(UsageError)
  func run() throws
}

/// Options every command that touches a data directory shares.
struct DataOptions {
  var directory: URL

  /// `--data DIR`, else `LARDER_DATA`, else `./data`.
  init(_ arguments: inout Arguments) throws(UsageError) {
    let path = try arguments.option("--data") ?? ProcessInfo.processInfo.environment["LARDER_DATA"] ?? "data"
    guard !path.isEmpty else { throw UsageError("--data needs a directory") }
    directory = URL(fileURLWithPath: path)
  }

  func open() throws -> Larder { try Larder(at: directory) }
}

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

/// A one-line progress bar on stderr, drawn only when stderr is a terminal.
final class ProgressBar {
  private let total: Int64
  private let label: String
  private let enabled: Bool
  private var lastDraw = Date.distantPast

  init(total: Int64, label: String) {
    self.total = total
    self.label = label
    enabled = isatty(STDERR_FILENO) == 1 && total >= 8 << 20
  }

  func update(_ done: Int64) {
    guard enabled, Date().timeIntervalSince(lastDraw) > 0.1 || done == total else { return }
    lastDraw = Date()
    let fraction = total > 0 ? Double(done) / Double(total) : 1
    let width = 30
    let filled = Int(fraction * Double(width))
    let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
    let line = String(format: "\r%@ [%@] %3.0f%% %@", label, bar, fraction * 100, Output.bytes(done))
    FileHandle.standardError.write(Data(line.utf8))
  }

  func finish() {
    if enabled { FileHandle.standardError.write(Data("\n".utf8)) }
  }
}
