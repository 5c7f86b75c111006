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
      if let parsed = JSONValue.parseObject(Array("{\"v\":\(raw)}".utf8))?["v"] {
        claims[key] = parsed
      } else {
        claims[key] = .string(raw)
      }
    }
    ttl = try arguments.option("--ttl").map { text throws(UsageError) in try parseDuration(text) } ?? .seconds(3600)
    _ = try arguments.finish(positionals: 0...0)
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
