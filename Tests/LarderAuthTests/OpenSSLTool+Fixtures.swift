import Foundation
import LarderAuth
import LarderCrypto
import LarderTestSupport

/// Where the fixture keys live for one test run; removed at exit.
private let fixtureDirectory = FileManager.default.temporaryDirectory
  .appendingPathComponent(
    "larder-auth-tests-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)")

/// The fixture keys of the auth tests, made by `openssl` (LarderTestSupport's `OpenSSLTool`).
extension OpenSSLTool {
  /// One set of keys for the whole test run (RSA generation is the slow part): `rsa`, `rsa-other`,
  /// `rsa-weak` (1024 bits), `ec`, `ec-other`, `ec-p384`, `ed25519`, each with `.pub`, and `rsa.crt`.
  static let shared: OpenSSLTool = {
    do {
      let tool = try OpenSSLTool(directory: fixtureDirectory)
      atexit { try? FileManager.default.removeItem(at: fixtureDirectory) }
      for name in ["rsa", "rsa-other"] { try tool.makeRSAKey(name) }
      try tool.makeRSAKey("rsa-weak", bits: 1024)
      for name in ["ec", "ec-other"] { try tool.makeECKey(name) }
      try tool.makeECKey("ec-p384", curve: "secp384r1")
      try tool.makeEd25519Key("ed25519")
      try tool.run([
        "req", "-new", "-x509", "-key", tool.path("rsa"), "-subj", "/CN=larder-test", "-days", "2", "-out",
        tool.path("rsa.crt"),
      ])
      return tool
    } catch { fatalError("openssl fixture: \(error)") }
  }()

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
    else { throw HarnessFailure("cannot parse RSA components of \(key)") }
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
    guard der.count == 91, point[0] == 0x04 else { throw HarnessFailure("unexpected SPKI for \(key)") }
    return (Array(point[1...32]), Array(point[33...64]))
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
