import Foundation
import Larder
import LarderAuth
import LarderCrypto
import LarderServer
import LarderTestSupport

/// The package root, found from this file's path (`Tests/LarderServerTests/Security/…`).
let securityPackageRoot: URL = URL(fileURLWithPath: #filePath)
  .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
  .deletingLastPathComponent()

/// `storage.rules.example` at the package root: the file the end-to-end tests enforce.
let exampleRulesURL = securityPackageRoot.appendingPathComponent("storage.rules.example")

/// A 1×1 RGBA PNG (67 bytes) that libmagic sniffs as `image/png`.
let tinyPNG: [UInt8] = Array(
  Data(
    base64Encoded:
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")!)

/// Writes `text` to a fresh temporary file and returns its URL (removed by the caller).
func temporaryRulesFile(_ text: String) throws -> URL {
  let url = FileManager.default.temporaryDirectory.appendingPathComponent(
    "larder-sec-\(UUID().uuidString).rules")
  try Data(text.utf8).write(to: url)
  return url
}

/// Runs `body` against a live service enforcing `rules` (default: `storage.rules.example`).
func withRulesService<T>(
  rules: URL = exampleRulesURL, configure: (inout LarderService.Options) -> Void = { _ in },
  _ body: (LiveService) throws -> T
) throws -> T {
  try withService(policy: .rulesFile(rules), configure: configure, body)
}

/// Runs `body` against an in-process service enforcing `rules` (default: `storage.rules.example`).
func withInProcessRulesService<T>(
  rules: URL = exampleRulesURL, configure: (inout LarderService.Options) -> Void = { _ in },
  _ body: (InProcessService) throws -> T
) throws -> T {
  try withInProcessService(policy: .rulesFile(rules), configure: configure, body)
}

extension LiveService {
  /// Sends a request whose body is refused before it is read: only the head goes out.
  func sendHeadOnly(_ request: WireRequest) throws -> WireResponse {
    let connection = try WireConnection(port: port)
    try connection.send(request.head(closing: true))
    return try connection.readResponse()
  }
}

/// A compact JWS from raw parts, for forged and hand-signed tokens.
enum ForgedJWT {
  static func part(_ object: [String: JSONValue]) -> String { Base64URL.encode(JSONValue.serialize(object)) }

  static func claims(uid: String, ttl: Int64 = 3600, extra: [String: JSONValue] = [:]) -> [String: JSONValue]
  {
    let now = Int64(Date().timeIntervalSince1970)
    var c = extra
    c["sub"] = .string(uid)
    c["iat"] = .int(now)
    c["exp"] = .int(now + ttl)
    return c
  }

  static func hs256(_ claims: [String: JSONValue], secret: [UInt8]) -> String {
    let input = part(["alg": "HS256", "typ": "JWT"]) + "." + part(claims)
    return input + "." + Base64URL.encode(HMAC.sha256(key: secret, message: Array(input.utf8)))
  }
}

/// Two RSA keys (`rsa`, `rsa-other`) with their public PEMs, made once by `openssl`
/// (LarderTestSupport's `OpenSSLTool`): keys and signatures made independently of Larder.
extension OpenSSLTool {
  static let shared: OpenSSLTool = {
    do {
      let tool = try OpenSSLTool(
        directory: FileManager.default.temporaryDirectory.appendingPathComponent(
          "larder-sec-keys-\(UUID().uuidString)"))
      for name in ["rsa", "rsa-other"] { try tool.makeRSAKey(name) }
      return tool
    } catch { fatalError("openssl fixture: \(error)") }
  }()

  /// An RS256 token over `claims`, signed by `openssl dgst -sha256 -sign` with key `key`.
  func rs256(_ claims: [String: JSONValue], key: String = "rsa") throws -> String {
    let input = ForgedJWT.part(["alg": "RS256", "typ": "JWT"]) + "." + ForgedJWT.part(claims)
    return input + "." + Base64URL.encode(try signRS256(input, key: key))
  }
}
