import LarderCrypto
import Testing

/// RSA key generation, PKCS#8 PEM export and RS256 signing (what service-account key files hold).
struct PrivateKeyTests {
  static let key = try! PrivateKey.generateRSA(bits: 2048)

  @Test func generatedKeyRoundTripsThroughPKCS8PEM() throws {
    let pem = Self.key.pkcs8PEM()
    #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
    #expect(pem.hasSuffix("-----END PRIVATE KEY-----\n"))
    #expect(Self.key.bits == 2048)
    let read = try PrivateKey(pem: Array(pem.utf8))
    #expect(read.publicKeyPEM() == Self.key.publicKeyPEM())
    #expect(read.pkcs8PEM() == pem)
    #expect(Self.key.publicKeyPEM().hasPrefix("-----BEGIN PUBLIC KEY-----\n"))
    #expect(try Self.key.publicKey().kind == .rsa(bits: 2048))
  }

  @Test func rs256SignaturesVerifyWithThePublicKeyOnly() throws {
    let message = Array("header.payload".utf8)
    let signature = try Self.key.signRS256(message)
    #expect(signature.count == 256)
    let publicKey = try PrivateKey(pem: Array(Self.key.pkcs8PEM().utf8)).publicKey()
    #expect(publicKey.verifyRS256(signature: signature, message: message))
    #expect(!publicKey.verifyRS256(signature: signature, message: Array("header.payloaD".utf8)))
    var flipped = signature
    flipped[7] ^= 1
    #expect(!publicKey.verifyRS256(signature: flipped, message: message))
    let other = try PrivateKey.generateRSA().publicKey()
    #expect(!other.verifyRS256(signature: signature, message: message))
  }

  @Test func shortKeysAndNonKeysAreRefused() {
    #expect(throws: CryptoError.weakKey(bits: 1024, minimumBits: 2048)) {
      try PrivateKey.generateRSA(bits: 1024)
    }
    #expect(throws: CryptoError.self) {
      try PrivateKey(pem: Array("-----BEGIN PRIVATE KEY-----\nAAAA\n".utf8))
    }
    #expect(throws: CryptoError.self) { try PrivateKey(pem: Array(Self.key.publicKeyPEM().utf8)) }
  }
}
