import LarderCrypto
import Testing

struct Base64URLTests {
  @Test func rfc4648VectorsWithoutPadding() {
    let vectors = [
      "": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE",
      "foobar": "Zm9vYmFy",
    ]
    for (plain, encoded) in vectors {
      #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
      #expect(Base64URL.decode(encoded) == Array(plain.utf8))
    }
  }

  @Test func urlSafeAlphabet() {
    #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
    #expect(Base64URL.decode("-_8") == [0xfb, 0xff])
    #expect(Base64URL.encode([0x3e, 0x3f]) == "Pj8")
  }

  @Test func roundTripsEveryLength() {
    for length in 0..<70 {
      let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 251) }
      #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
    }
  }

  @Test func refusesEverythingNonCanonical() {
    for bad in ["Zg==", "Zm8=", "+/8", "Zm9v\n", " Zg", "Z", "Zm9vY", "Zh", "Zm9", "Zm€v", "Zm.v"] {
      #expect(Base64URL.decode(bad) == nil, "\(bad)")
    }
    // "Zh" and "Zm9" carry non-zero unused bits ("Zg" and "Zm8" are the canonical spellings).
    #expect(Base64URL.decode("Zg") == [0x66])
  }
}
