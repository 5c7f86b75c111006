import Foundation
import Larder
import LarderAuth
import LarderServer

struct TokenCommand: Command {
  static let uid = Option.value("--uid", "U", required: true, help: "the token's subject (request.auth.uid)")
  static let claim = Option.repeated("--claim", "k=v", help: "an extra claim (request.auth.token.k)")
  static let ttl = Option.value("--ttl", "DURATION", default: "1h", help: "how long the token is valid")

  static let configuration = CommandConfiguration(
    name: "token", summary: "print a development token (HS256, signed with the catalog's token secret)",
    discussion: """
      Claim values that parse as JSON (true, 42, "x", [..]) are used as such, others as strings.
      The key is the catalog's token_secret, shared by every node on that catalog; a store
      upgraded from a Larder that kept it in DATA/secret adopts that file's key.
      """,
    options: [uid, claim, ttl], groups: [StoreOptions.self])

  var store: StoreOptions
  var uid: String
  var claims: [String: JSONValue] = [:]
  var ttl: Duration

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    guard let uid = arguments.value(Self.uid), !uid.isEmpty else { throw UsageError("--uid is required") }
    self.uid = uid
    for pair in arguments.values(Self.claim) {
      guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
        throw UsageError("--claim takes key=value, got '\(pair)'")
      }
      let key = String(pair[..<eq])
      let raw = String(pair[pair.index(after: eq)...])
      claims[key] = Self.claimValue(raw)
    }
    ttl = try parseDuration(arguments.value(Self.ttl)!)
    guard ttl <= Self.maxTTL else { throw UsageError("--ttl must be at most 100 years (36500d)") }
  }

  /// Long enough for any development token; far below where `exp` would leave Int64.
  static let maxTTL: Duration = .seconds(36_500 * 86_400)

  /// `raw` as JSON when it is exactly one JSON value, else the string itself. Parsed alone, so
  /// `1,"b":2` is not spliced into an object as `{"v":1,"b":2}` and read as `1`.
  static func claimValue(_ raw: String) -> JSONValue {
    JSONValue.parse(Array(raw.utf8)) ?? .string(raw)
  }

  func run() throws {
    let secret = try LarderService.tokenSecret(of: store.open())
    let seconds = Double(ttl.components.seconds) + Double(ttl.components.attoseconds) / 1e18
    print(TokenIssuer(secret: secret).issue(uid: uid, claims: claims, ttl: seconds))
  }
}
