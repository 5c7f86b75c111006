import Foundation
import LarderCrypto
import LarderTestSupport
import Testing

@testable import LarderAuth

struct KeyLoaderTests {
  let tool = OpenSSLTool.shared

  @Test func pemFilesLoadPublicKeysAndCertificates() throws {
    let rsa = try KeyLoader.pemFile(at: tool.url("rsa.pub"), kid: "r")
    #expect(rsa.count == 1)
    #expect(rsa[0].kid == "r")
    #expect(rsa[0].key.kind == .rsa(bits: 2048))
    #expect(try KeyLoader.pemFile(at: tool.url("ec.pub"))[0].key.kind == .ecP256)
    #expect(try KeyLoader.pemFile(at: tool.url("rsa.crt"))[0].key.kind == .rsa(bits: 2048))
    // Two keys in one file.
    let both = tool.contents("rsa.pub") + tool.contents("ec.pub")
    #expect(try KeyLoader.pem(both).map(\.algorithm) == [.rs256, .es256])
  }

  @Test func unsupportedWeakAndPrivateKeysAreRefused() throws {
    #expect(
      throws: AuthConfigurationError.invalidKeyFile(
        path: tool.path("rsa-weak.pub"), reason: "RSA key of 1024 bits is too short (minimum 2048)")
    ) {
      try KeyLoader.pemFile(at: tool.url("rsa-weak.pub"))
    }
    #expect(
      throws: AuthConfigurationError.invalidKeyFile(
        path: tool.path("ed25519.pub"), reason: "unsupported key type: ED25519")
    ) {
      try KeyLoader.pemFile(at: tool.url("ed25519.pub"))
    }
    #expect(
      throws: AuthConfigurationError.invalidKeyFile(
        path: tool.path("ec-p384.pub"), reason: "unsupported key type: EC curve secp384r1")
    ) {
      try KeyLoader.pemFile(at: tool.url("ec-p384.pub"))
    }
    let noKey = "no PEM \"PUBLIC KEY\" or \"CERTIFICATE\" block could be read"
    #expect(
      throws: AuthConfigurationError.invalidKeyFile(path: tool.path("rsa"), reason: "invalid key: " + noKey)
    ) {
      try KeyLoader.pemFile(at: tool.url("rsa"))
    }
    #expect(throws: AuthConfigurationError.invalidKeyFile(path: "<pem>", reason: "invalid key: " + noKey)) {
      try KeyLoader.pem(Array("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n".utf8))
    }
    #expect(
      throws: AuthConfigurationError.io(path: tool.path("absent.pem"), operation: "open", errno: ENOENT)
    ) {
      try KeyLoader.pemFile(at: tool.url("absent.pem"))
    }
  }

  @Test func jwksSkipsForeignEntriesAndRefusesBrokenOnes() throws {
    let rsa = try tool.rsaComponents("rsa")
    let ec = try tool.ecComponents("ec")
    let n = Base64URL.encode(rsa.n)
    let e = Base64URL.encode(rsa.e)
    let x = Base64URL.encode(ec.x)
    let y = Base64URL.encode(ec.y)
    let mixed = """
      {"keys": [
        {"kty": "RSA", "kid": "enc", "use": "enc", "n": "\(n)", "e": "\(e)"},
        {"kty": "RSA", "kid": "ps", "alg": "PS256", "n": "\(n)", "e": "\(e)"},
        {"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
        {"kty": "EC", "kid": "p384", "crv": "P-384", "x": "\(x)", "y": "\(y)"},
        {"kty": "oct", "kid": "sym", "k": "AAAA"},
        {"kty": "RSA", "kid": "good", "n": "\(n)", "e": "\(e)"}
      ]}
      """
    #expect(try KeyLoader.jwks(Array(mixed.utf8)).map(\.kid) == ["good"])

    func refused(_ json: String) -> String? {
      do {
        _ = try KeyLoader.jwks(Array(json.utf8))
        return nil
      } catch {
        return error.message
      }
    }
    #expect(
      refused(#"{"keys": []}"#) == "key file <jwks>: no RS256 or ES256 signing key (RSA, or EC on P-256)")
    #expect(
      refused(#"[1, 2]"#) == "key file <jwks>: not a JWKS document (a JSON object with a \"keys\" array)")
    #expect(
      refused("not json") == "key file <jwks>: not a JWKS document (a JSON object with a \"keys\" array)")
    #expect(refused(#"{"keys": [7]}"#) == "key file <jwks>: keys[0] is not an object")
    #expect(
      refused(#"{"keys": [{"kty": "RSA", "kid": 1, "n": "AQAB", "e": "AQAB"}]}"#)
        == "key file <jwks>: keys[0].kid is not a string")
    #expect(
      refused(#"{"keys": [{"kty": "RSA", "e": "AQAB"}]}"#)
        == "key file <jwks>: keys[0].n is missing or not base64url")
    #expect(
      refused(#"{"keys": [{"kty": "RSA", "n": "AQ==", "e": "AQAB"}]}"#)
        == "key file <jwks>: keys[0].n is missing or not base64url")
    #expect(
      refused(#"{"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB"}]}"#)
        == "key file <jwks>: keys[0]: invalid key: the RSA public key failed OpenSSL's validity check")
    // A point off the curve: y + 1.
    var offCurve = ec.y
    offCurve[31] ^= 0x01
    let bad =
      #"{"keys": [{"kty": "EC", "crv": "P-256", "x": "\#(x)", "y": "\#(Base64URL.encode(offCurve))"}]}"#
    #expect(refused(bad)?.hasPrefix("key file <jwks>: keys[0]: invalid key: ") == true)
    let short = #"{"keys": [{"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "\#(y)"}]}"#
    #expect(
      refused(short) == "key file <jwks>: keys[0]: invalid key: P-256 coordinates must be 32 bytes each")
  }

  @Test func jwksFileIsReadFromDisk() throws {
    let ec = try tool.ecComponents("ec")
    let dir = try TemporaryDirectory()
    let file = dir.url.appendingPathComponent("jwks.json")
    let json =
      #"{"keys":[{"kty":"EC","kid":"e","crv":"P-256","x":"\#(Base64URL.encode(ec.x))","y":"\#(Base64URL.encode(ec.y))"}]}"#
    try Data(json.utf8).write(to: file)
    let keys = try KeyLoader.jwksFile(at: file)
    #expect(keys.map(\.kid) == ["e"])
    #expect(keys[0].key.kind == .ecP256)
  }
}
