import Foundation
import LarderAuth
import LarderCrypto

/// Where the fixture keys live for one test run; removed at exit.
private let fixtureDirectory = FileManager.default.temporaryDirectory
  .appendingPathComponent(
    "larder-auth-tests-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)")

/// Keys and signatures made by the `openssl` command-line tool: an implementation independent of
/// the code under test, so a good token here is good by someone else's reckoning.
struct OpenSSLTool: Sendable {
  struct Failure: Error, CustomStringConvertible {
    let description: String
  }

  /// One set of keys for the whole test run (RSA generation is the slow part).
  static let shared: OpenSSLTool = {
    do { return try OpenSSLTool() } catch { fatalError("openssl fixture: \(error)") }
  }()

  let directory: URL

  private init() throws {
    directory = fixtureDirectory
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    atexit { try? FileManager.default.removeItem(at: fixtureDirectory) }
    for name in ["rsa", "rsa-other"] {
      _ = try run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path(name)])
    }
    _ = try run([
      "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", path("rsa-weak"),
    ])
    for name in ["ec", "ec-other"] {
      _ = try run(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path(name)])
    }
    _ = try run(["ecparam", "-name", "secp384r1", "-genkey", "-noout", "-out", path("ec-p384")])
    _ = try run(["genpkey", "-algorithm", "ED25519", "-out", path("ed25519")])
    for name in ["rsa", "rsa-other", "rsa-weak", "ec", "ec-other", "ec-p384", "ed25519"] {
      _ = try run(["pkey", "-in", path(name), "-pubout", "-out", path(name + ".pub")])
    }
    _ = try run([
      "req", "-new", "-x509", "-key", path("rsa"), "-subj", "/CN=larder-test", "-days", "2", "-out",
      path("rsa.crt"),
    ])
  }

  /// The path of a file in the fixture directory (`rsa`, `rsa.pub`, `ec`, `ec.pub`, `rsa.crt`…).
  func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

  func url(_ name: String) -> URL { directory.appendingPathComponent(name) }

  func contents(_ name: String) -> [UInt8] {
    Array(FileManager.default.contents(atPath: path(name)) ?? Data())
  }

  /// Runs `openssl args…` with `input` on stdin; returns stdout, throws on a non-zero exit.
  ///
  /// Spawned with `posix_spawn` and files for stdin/stdout/stderr rather than Foundation's
  /// `Process`, whose SIGCHLD handling on Linux crashes on EINTR when tests run in parallel.
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
    let out = FileManager.default.contents(atPath: outPath) ?? Data()
    guard status == 0 else {
      let err = FileManager.default.contents(atPath: errPath) ?? Data()
      throw Failure(
        description:
          "openssl \(arguments.joined(separator: " ")) (status \(status)): \(String(decoding: err, as: UTF8.self))"
      )
    }
    return Array(out)
  }

  /// RSASSA-PKCS1-v1_5 SHA-256 signature by `openssl dgst -sign`.
  func signRS256(_ message: String, key: String = "rsa") throws -> [UInt8] {
    try run(["dgst", "-sha256", "-sign", path(key)], input: Array(message.utf8))
  }

  /// ECDSA P-256 signature by `openssl dgst -sign`, converted from DER to JOSE's `r || s`.
  func signES256(_ message: String, key: String = "ec") throws -> [UInt8] {
    try Self.rawFromDER(run(["dgst", "-sha256", "-sign", path(key)], input: Array(message.utf8)))
  }

  /// HMAC-SHA256 by `openssl dgst -mac HMAC`.
  func signHS256(_ message: String, secret: [UInt8]) throws -> [UInt8] {
    try run(
      ["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:" + Hex.encode(secret), "-binary"],
      input: Array(message.utf8))
  }

  /// The RSA public key's `n` and `e`, from `openssl rsa -modulus` and `openssl pkey -text`.
  func rsaComponents(_ key: String) throws -> (n: [UInt8], e: [UInt8]) {
    let modulusLine = String(
      decoding: try run(["rsa", "-pubin", "-in", path(key + ".pub"), "-modulus", "-noout"]), as: UTF8.self)
    let hex = modulusLine.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(
      of: "Modulus=", with: "")
    let text = String(
      decoding: try run(["pkey", "-pubin", "-in", path(key + ".pub"), "-text", "-noout"]), as: UTF8.self)
    guard let n = Hex.decode(hex),
      let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Exponent:") }),
      let decimal = line.split(separator: " ").dropFirst().first, var e = UInt64(decimal)
    else { throw Failure(description: "cannot parse RSA components of \(key)") }
    var exponent = [UInt8]()
    while e > 0 {
      exponent.insert(UInt8(e & 0xff), at: 0)
      e >>= 8
    }
    return (n, exponent)
  }

  /// The P-256 public key's `x` and `y`: the last 65 bytes of its DER SubjectPublicKeyInfo are the
  /// uncompressed point `04 || x || y`.
  func ecComponents(_ key: String) throws -> (x: [UInt8], y: [UInt8]) {
    let der = try run(["pkey", "-pubin", "-in", path(key + ".pub"), "-outform", "DER"])
    let point = Array(der.suffix(65))
    guard der.count == 91, point[0] == 0x04 else { throw Failure(description: "unexpected SPKI for \(key)") }
    return (Array(point[1...32]), Array(point[33...64]))
  }

  /// DER `SEQUENCE { INTEGER r, INTEGER s }` → 64-byte `r || s`, parsed by hand (short-form lengths
  /// suffice for P-256).
  static func rawFromDER(_ der: [UInt8]) throws -> [UInt8] {
    guard der.count >= 8, der[0] == 0x30, Int(der[1]) == der.count - 2 else {
      throw Failure(description: "not an ECDSA DER signature")
    }
    var index = 2
    var raw = [UInt8]()
    for _ in 0..<2 {
      guard der[index] == 0x02 else { throw Failure(description: "expected INTEGER") }
      let length = Int(der[index + 1])
      var integer = Array(der[(index + 2)..<(index + 2 + length)])
      while integer.count > 32, integer.first == 0 { integer.removeFirst() }
      guard integer.count <= 32 else { throw Failure(description: "integer too long") }
      raw += [UInt8](repeating: 0, count: 32 - integer.count) + integer
      index += 2 + length
    }
    return raw
  }
}

/// Builds compact JWS tokens for tests.
enum TestJWT {
  static func encode(_ object: [String: JSONValue]) -> String {
    Base64URL.encode(JSONValue.serialize(object))
  }

  /// `header.payload` for the given header fields and claims.
  static func signingInput(alg: String, kid: String? = nil, claims: [String: JSONValue]) -> String {
    var header: [String: JSONValue] = ["alg": .string(alg), "typ": "JWT"]
    if let kid { header["kid"] = .string(kid) }
    return encode(header) + "." + encode(claims)
  }

  static func token(_ signingInput: String, _ signature: [UInt8]) -> String {
    signingInput + "." + Base64URL.encode(signature)
  }
}
