import Foundation

/// The `openssl` command-line tool over one directory of key files: keys and signatures made by an
/// implementation independent of the code under test, so a good token here is good by someone
/// else's reckoning.
///
/// ```swift
/// let openssl = try OpenSSLTool(directory: dir)
/// try openssl.makeRSAKey("rsa")
/// let signature = try openssl.signRS256("header.payload", key: "rsa")
/// ```
public struct OpenSSLTool: Sendable {
  public static let executable = "/usr/bin/openssl"

  /// Where the key files live (`rsa`, `rsa.pub`, …).
  public let directory: URL

  /// Creates `directory` if needed; makes no keys.
  public init(directory: URL) throws {
    self.directory = directory
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
  }

  /// The path of a file in the key directory (`rsa`, `rsa.pub`, `ec`, `rsa.crt`…).
  public func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

  public func url(_ name: String) -> URL { directory.appendingPathComponent(name) }

  public func contents(_ name: String) -> [UInt8] {
    Array(FileManager.default.contents(atPath: path(name)) ?? Data())
  }

  /// Runs `openssl arguments…` with `input` on stdin; returns stdout.
  ///
  /// - Throws: `HarnessFailure` on a non-zero exit (with openssl's stderr) or a failed spawn.
  @discardableResult
  public func run(_ arguments: [String], input: [UInt8] = []) throws -> [UInt8] {
    let result = try Subprocess.run(Self.executable, arguments, stdin: input)
    guard result.status == 0 else {
      throw HarnessFailure(
        "openssl \(arguments.joined(separator: " ")) (status \(result.status)): \(result.stderr)")
    }
    return result.stdoutBytes
  }

  /// Generates RSA key `name` of `bits` bits and its public PEM `name.pub`.
  public func makeRSAKey(_ name: String, bits: Int = 2048) throws {
    try run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:\(bits)", "-out", path(name)])
    try exportPublicKey(name)
  }

  /// Generates EC key `name` on `curve` (an openssl curve name) and its public PEM `name.pub`.
  public func makeECKey(_ name: String, curve: String = "prime256v1") throws {
    try run(["ecparam", "-name", curve, "-genkey", "-noout", "-out", path(name)])
    try exportPublicKey(name)
  }

  /// Generates Ed25519 key `name` and its public PEM `name.pub`.
  public func makeEd25519Key(_ name: String) throws {
    try run(["genpkey", "-algorithm", "ED25519", "-out", path(name)])
    try exportPublicKey(name)
  }

  /// Writes `name.pub`, the public half of key `name`.
  public func exportPublicKey(_ name: String) throws {
    try run(["pkey", "-in", path(name), "-pubout", "-out", path(name + ".pub")])
  }

  /// RSASSA-PKCS1-v1_5 SHA-256 signature by `openssl dgst -sign`.
  public func signRS256(_ message: String, key: String = "rsa") throws -> [UInt8] {
    try run(["dgst", "-sha256", "-sign", path(key)], input: Array(message.utf8))
  }

  /// ECDSA P-256 signature by `openssl dgst -sign`, converted from DER to JOSE's `r || s`.
  public func signES256(_ message: String, key: String = "ec") throws -> [UInt8] {
    try Self.rawFromDER(run(["dgst", "-sha256", "-sign", path(key)], input: Array(message.utf8)))
  }

  /// HMAC-SHA256 by `openssl dgst -mac HMAC`.
  public func signHS256(_ message: String, secret: [UInt8]) throws -> [UInt8] {
    let hexKey = secret.map { String(format: "%02x", $0) }.joined()
    return try run(
      ["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:" + hexKey, "-binary"],
      input: Array(message.utf8))
  }

  /// DER `SEQUENCE { INTEGER r, INTEGER s }` → 64-byte `r || s`, parsed by hand (short-form lengths
  /// suffice for P-256).
  ///
  /// - Throws: `HarnessFailure` when `der` is not such a signature.
  public static func rawFromDER(_ der: [UInt8]) throws -> [UInt8] {
    guard der.count >= 8, der[0] == 0x30, Int(der[1]) == der.count - 2 else {
      throw HarnessFailure("not an ECDSA DER signature")
    }
    var index = 2
    var raw = [UInt8]()
    for _ in 0..<2 {
      guard der[index] == 0x02 else { throw HarnessFailure("expected INTEGER") }
      let length = Int(der[index + 1])
      var integer = Array(der[(index + 2)..<(index + 2 + length)])
      while integer.count > 32, integer.first == 0 { integer.removeFirst() }
      guard integer.count <= 32 else { throw HarnessFailure("integer too long") }
      raw += [UInt8](repeating: 0, count: 32 - integer.count) + integer
      index += 2 + length
    }
    return raw
  }
}
