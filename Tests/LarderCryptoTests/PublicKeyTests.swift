import LarderCrypto
import Testing

/// RFC 7515 Appendix A.3: the ES256 example key and signature.
struct PublicKeyTests {
  let x = Base64URL.decode("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU")!
  let y = Base64URL.decode("x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0")!
  let input = Array(
    ("eyJhbGciOiJFUzI1NiJ9"
      + ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ")
      .utf8)
  let signature = Base64URL.decode(
    "DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q")!

  @Test func rfc7515ES256ExampleVerifies() throws {
    let key = try PublicKey(p256X: x, y: y)
    #expect(key.kind == .ecP256)
    #expect(key.verifyES256(rawSignature: signature, message: input))
    #expect(!key.verifyRS256(signature: signature, message: input))
    var tampered = input
    tampered[25] ^= 0x01
    #expect(!key.verifyES256(rawSignature: signature, message: tampered))
    #expect(!key.verifyES256(rawSignature: Array(signature.prefix(63)), message: input))
    #expect(!key.verifyES256(rawSignature: [UInt8](repeating: 0, count: 64), message: input))
  }

  @Test func pointsOffTheCurveAndBadLengthsAreRefused() {
    var offCurve = y
    offCurve[0] ^= 0x80
    #expect(throws: CryptoError.self) { try PublicKey(p256X: x, y: offCurve) }
    #expect(throws: CryptoError.invalidKey("P-256 coordinates must be 32 bytes each")) {
      try PublicKey(p256X: Array(x.dropFirst()), y: y)
    }
    #expect(throws: CryptoError.invalidKey("RSA modulus or exponent has an impossible length")) {
      try PublicKey(rsaModulus: [], exponent: [1, 0, 1])
    }
    #expect(CryptoError.weakKey(bits: 1024, minimumBits: 2048).code == "weak_key")
  }

  @Test func pemWithoutKeysIsRefused() {
    let reason = "no PEM \"PUBLIC KEY\" or \"CERTIFICATE\" block could be read"
    #expect(throws: CryptoError.invalidKey(reason)) { try PublicKey.allFromPEM([]) }
    #expect(throws: CryptoError.invalidKey(reason)) { try PublicKey.allFromPEM(Array("garbage".utf8)) }
  }
}
