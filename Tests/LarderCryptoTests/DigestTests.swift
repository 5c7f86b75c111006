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

  /// RFC 4231's vectors: a key shorter than the block, one of exactly 131 bytes (longer than
  /// the block: hashed first), and data longer than the block.
  @Test func hmacSha256Rfc4231Vectors() {
    let cases: [(key: [UInt8], data: [UInt8], mac: String)] = [
      (
        Array(repeating: 0x0b, count: 20), Array("Hi There".utf8),
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
      ),
      (
        Array(repeating: 0xaa, count: 20), Array(repeating: 0xdd, count: 50),
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
      ),
      (
        Array(repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
      ),
      (
        Array(repeating: 0xaa, count: 131),
        Array(
          ("This is a test using a larger than block-size key and a larger than block-size data. "
            + "The key needs to be hashed before being used by the HMAC algorithm.").utf8),
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
      ),
      // A key of exactly one block is used as it is, one byte more is hashed (Python's hmac).
      (
        Array(repeating: 0x01, count: 64), Array("x".utf8),
        "c668fc54e1a2a267c502413f4580c5bb5d9229fef5fb9b4ff5f4ce5e76299783"
      ),
      (
        Array(repeating: 0x01, count: 65), Array("x".utf8),
        "fa34864aa49f680b10d9dd4d77db4bf268cdc0fe6e204c10fb63c62738e69497"
      ),
    ]
    for (key, data, mac) in cases {
      #expect(Hex.encode(HMAC.sha256(key: key, message: data)) == mac, "key of \(key.count) bytes")
    }
  }

  @Test func hexRoundTripAndRejectsGarbage() {
    #expect(Hex.decode("00ffA0") == [0, 255, 160])
    #expect(Hex.decode("abc") == nil)
    #expect(Hex.decode("zz") == nil)
    #expect(SecureRandom.hexIdentifier().count == 32)
    #expect(SecureRandom.bytes(16) != SecureRandom.bytes(16))
  }
}
