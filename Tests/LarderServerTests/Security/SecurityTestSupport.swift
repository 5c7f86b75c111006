import Foundation
import Larder
import LarderAuth
import LarderCrypto
import LarderServer

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

extension LiveService {
  /// `Authorization: Bearer …` for a development token of `uid`.
  func auth(_ uid: String) -> [(String, String)] {
    [("Authorization", "Bearer \(service.developmentToken(uid: uid))")]
  }

  /// Row counts of the catalog tables that a publish would touch.
  func rowCounts() throws -> [String: Int] {
    try service.larder.catalog.read { db in
      var out: [String: Int] = [:]
      for table in ["objects", "files", "blobs"] {
        out[table] = Int(try db.row("SELECT count(*) AS n FROM \(table)")?.int("n") ?? -1)
      }
      return out
    }
  }

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

/// The `openssl` command-line tool, spawned with `posix_spawn` (Foundation's `Process` is
/// unreliable under parallel tests on Linux): keys and signatures made independently of Larder.
struct OpenSSLCLI: Sendable {
  struct Failure: Error, CustomStringConvertible { let description: String }

  /// One directory with two RSA keys (`rsa`, `rsa-other`) and their public PEMs, made once.
  static let shared: OpenSSLCLI = {
    do { return try OpenSSLCLI() } catch { fatalError("openssl fixture: \(error)") }
  }()

  let directory: URL

  private init() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-sec-keys-\(UUID().uuidString)")
    directory = dir
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    for name in ["rsa", "rsa-other"] {
      try run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path(name)])
      try run(["pkey", "-in", path(name), "-pubout", "-out", path(name + ".pub")])
    }
  }

  func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

  @discardableResult
  func run(_ arguments: [String], input: [UInt8] = []) throws -> [UInt8] {
    let stem = directory.appendingPathComponent("io-" + UUID().uuidString).path
    let (inPath, outPath, errPath) = (stem + ".in", stem + ".out", stem + ".err")
    defer { for p in [inPath, outPath, errPath] { unlink(p) } }
    guard FileManager.default.createFile(atPath: inPath, contents: Data(input)) else {
      throw Failure(description: "cannot write \(inPath)")
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, inPath, O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    let argv: [UnsafeMutablePointer<CChar>?] = (["openssl"] + arguments).map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    var pid = pid_t()
    let spawned = posix_spawn(&pid, "/usr/bin/openssl", &actions, nil, argv, environ)
    guard spawned == 0 else { throw Failure(description: "posix_spawn openssl: \(spawned)") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
      guard errno == EINTR else { throw Failure(description: "waitpid: \(errno)") }
    }
    guard status == 0 else {
      let err = FileManager.default.contents(atPath: errPath) ?? Data()
      throw Failure(description: "openssl \(arguments.first ?? ""): \(String(decoding: err, as: UTF8.self))")
    }
    return Array(FileManager.default.contents(atPath: outPath) ?? Data())
  }

  /// An RS256 token over `claims`, signed by `openssl dgst -sha256 -sign` with key `key`.
  func rs256(_ claims: [String: JSONValue], key: String = "rsa") throws -> String {
    let input = ForgedJWT.part(["alg": "RS256", "typ": "JWT"]) + "." + ForgedJWT.part(claims)
    return input + "."
      + Base64URL.encode(try run(["dgst", "-sha256", "-sign", path(key)], input: Array(input.utf8)))
  }
}
