import Foundation
import Larder
import LarderAuth

struct TokenCommand: Command {
  static let name = "token"
  static let summary = "print a development token (HS256, signed with DATA/secret)"
  static let usage = """
    usage: larder token --uid U [--claim k=v]... [--ttl 1h] [--data DIR]
      Claim values that parse as JSON (true, 42, "x", [..]) are used as such, others as strings.
    """
  var data: DataOptions
  var uid: String
  var claims: [String: JSONValue] = [:]
  var ttl: Duration

  init(_ arguments: inout Arguments) throws(UsageError) {
    data = try DataOptions(&arguments)
    guard let uid = try arguments.option("--uid"), !uid.isEmpty else { throw UsageError("--uid is required") }
    self.uid = uid
    for pair in try arguments.options("--claim") {
      guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
        throw UsageError("--claim takes key=value, got '\(pair)'")
      }
      let key = String(pair[..<eq])
      let raw = String(pair[pair.index(after: eq)...])
      claims[key] = Self.claimValue(raw)
    }
    ttl = try arguments.option("--ttl").map { text throws(UsageError) in try parseDuration(text) } ?? .seconds(3600)
    guard ttl <= Self.maxTTL else { throw UsageError("--ttl must be at most 100 years (36500d)") }
    _ = try arguments.finish(positionals: 0...0)
  }

  /// Long enough for any development token; far below where `exp` would leave Int64.
  static let maxTTL: Duration = .seconds(36_500 * 86_400)

  /// `raw` as JSON when it is exactly one JSON value, else the string itself. Parsed alone, so
  /// `1,"b":2` is not spliced into an object as `{"v":1,"b":2}` and read as `1`.
  static func claimValue(_ raw: String) -> JSONValue {
    JSONValue.parse(Array(raw.utf8)) ?? .string(raw)
  }

  func run() throws {
    try POSIXDirectory.make(data.directory)
    let secret = try SecretFile.loadOrCreate(at: data.directory.appendingPathComponent("secret"))
    let seconds = Double(ttl.components.seconds) + Double(ttl.components.attoseconds) / 1e18
    print(TokenIssuer(secret: secret).issue(uid: uid, claims: claims, ttl: seconds))
  }
}

enum POSIXDirectory {
  static func make(_ url: URL) throws {
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }
}
