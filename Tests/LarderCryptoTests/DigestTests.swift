import Foundation
import LarderCrypto
import Testing

struct DigestTests {
  @Test func sha256KnownVectors() {
    #expect(
      Hex.encode(Digest.hash(.sha256, [UInt8]()))
        == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    #expect(
      Hex.encode(Digest.hash(.sha256, Array("abc".utf8)))
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  }

  @Test func md5AndSha1KnownVectors() {
    #expect(Hex.encode(Digest.hash(.md5, Array("abc".utf8))) == "900150983cd24fb0d6963f7d28e17f72")
    #expect(
      Hex.encode(Digest.hash(.sha1, Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
  }

  @Test func incrementalEqualsOneShotAndCopyKeepsPrefix() {
    let data = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    let d = Digest(.sha256)
    d.update(data[0..<777])
    let prefix = d.copy()
    d.update(data[777...])
    #expect(d.finalize() == Digest.hash(.sha256, data))
    #expect(prefix.finalize() == Digest.hash(.sha256, data[0..<777]))
  }

  @Test func hmacSha256Rfc4231Case2() {
    let mac = HMAC.sha256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
    #expect(Hex.encode(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
  }

  @Test func hexRoundTripAndRejectsGarbage() {
    #expect(Hex.decode("00ffA0") == [0, 255, 160])
    #expect(Hex.decode("abc") == nil)
    #expect(Hex.decode("zz") == nil)
    #expect(SecureRandom.hexIdentifier().count == 32)
    #expect(SecureRandom.bytes(16) != SecureRandom.bytes(16))
  }
}
