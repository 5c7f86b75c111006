import LarderCrypto
import Testing

/// `Digest.savedState()` / `Digest(restoringSHA256:)`: a resumable upload continued on another
/// node resumes its SHA-256 from these bytes, so the digest must be exactly the one-shot hash.
struct DigestSavedStateTests {
  /// 1 MiB + 1007 bytes, (i·31 + 7) mod 256; its SHA-256 was computed by Python's hashlib.
  static let message: [UInt8] = (0..<(1 << 20) + 7 + 1000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
  static let messageSHA256 = "74ad5eeb8b53291e62e79860bc9bc8238130a86a23d516c90a317110b435046f"

  @Test(arguments: [0, 1, 63, 64, 65, (1 << 20) + 7])
  func restoredStateContinuesToTheOneShotHash(savedAfter split: Int) throws {
    let first = Digest(.sha256)
    first.update(Self.message[..<split])
    let state = first.savedState()
    #expect(state.count == 42 + split % 64)

    let resumed = try Digest(restoringSHA256: state)
    #expect(resumed.savedState() == state)
    resumed.update(Self.message[split...])
    #expect(Hex.encode(resumed.finalize()) == Self.messageSHA256)
    // The original goes on unaffected.
    first.update(Self.message[split...])
    #expect(Hex.encode(first.finalize()) == Self.messageSHA256)
  }

  @Test func restoredPrefixFinalizesToThePrefixHash() throws {
    let d = Digest(.sha256)
    d.update(Self.message[..<((1 << 20) + 7)])
    let resumed = try Digest(restoringSHA256: d.savedState())
    #expect(
      Hex.encode(resumed.finalize()) == "a8255b6a44c6903a9dd33385bc7b51f0d4915934e4064a5995317d487097eec2")
  }

  @Test func knownAnswersThroughASavedState() throws {
    let empty = try Digest(restoringSHA256: Digest(.sha256).savedState())
    #expect(
      Hex.encode(empty.finalize()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")

    let abc = Digest(.sha256)
    abc.update(Array("abc".utf8))
    // Version 1, the initial hash words (no block is complete yet), 24 bits, 3 pending bytes.
    #expect(
      Hex.encode(abc.savedState())
        == "01" + "6a09e667bb67ae853c6ef372a54ff53a510e527f9b05688c1f83d9ab5be0cd19"
        + "00000018" + "00000000" + "03" + "616263")
    let resumed = try Digest(restoringSHA256: abc.savedState())
    #expect(
      Hex.encode(resumed.finalize()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  }

  @Test func savedStateSplitByteByByteEqualsOneShot() throws {
    // NIST's two-block message, saved and restored after every byte.
    let message = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
    var d = Digest(.sha256)
    for byte in message {
      d.update([byte])
      d = try Digest(restoringSHA256: d.savedState())
    }
    #expect(Hex.encode(d.finalize()) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
  }

  @Test func copyThenSaveEqualsTheOriginalsSave() {
    let d = Digest(.sha256)
    d.update(Self.message[..<100_003])
    let copy = d.copy()
    #expect(copy.savedState() == d.savedState())
    #expect(copy.savedState().count == 42 + 100_003 % 64)
  }

  @Test func aLengthAbove32BitsRoundTrips() throws {
    // Nh = 7: a state past 512 MiB, which the tests cannot hash for real; it must come back as is.
    var state = Digest(.sha256).savedState()
    state.replaceSubrange(37..<41, with: [0, 0, 0, 7])
    #expect(try Digest(restoringSHA256: state).savedState() == state)
  }

  static func abcState() -> [UInt8] {
    let d = Digest(.sha256)
    d.update(Array("abc".utf8))
    return d.savedState()
  }

  static func rejection(_ state: [UInt8]) -> String? {
    do {
      _ = try Digest(restoringSHA256: state)
      return nil
    } catch let error as CryptoError {
      return error.code
    } catch {
      return "\(error)"
    }
  }

  @Test func malformedStatesAreRejected() {
    let good = Self.abcState()
    #expect(Self.rejection(good) == nil)

    var wrongVersion = good
    wrongVersion[0] = 2
    #expect(Self.rejection(wrongVersion) == "invalid_digest_state")
    #expect(Self.rejection([]) == "invalid_digest_state")
    #expect(Self.rejection(Array(good.prefix(41))) == "invalid_digest_state")
    #expect(Self.rejection(Array(good.dropLast())) == "invalid_digest_state")
    #expect(Self.rejection(good + [0]) == "invalid_digest_state")

    // num = 64 with a bit count that agrees with it modulo nothing: refused for num itself.
    var fullBlock = Digest(.sha256).savedState()
    fullBlock[41] = 64
    fullBlock += [UInt8](repeating: 0x61, count: 64)
    fullBlock.replaceSubrange(33..<37, with: [0, 0, 2, 0])  // 512 bits
    #expect(Self.rejection(fullBlock) == "invalid_digest_state")
    var num255 = Digest(.sha256).savedState()
    num255[41] = 255
    num255 += [UInt8](repeating: 0, count: 255)
    #expect(Self.rejection(num255) == "invalid_digest_state")

    // A bit count that disagrees with the pending bytes, and one that is not whole bytes.
    var disagreeing = good
    disagreeing.replaceSubrange(33..<37, with: [0, 0, 0, 32])  // 4 bytes, but 3 pending
    #expect(Self.rejection(disagreeing) == "invalid_digest_state")
    var partialByte = good
    partialByte.replaceSubrange(33..<37, with: [0, 0, 0, 25])
    #expect(Self.rejection(partialByte) == "invalid_digest_state")
  }

  @Test func aWellFormedStateOfAnotherLengthIsRefusedWhenTheLengthIsGiven() throws {
    let good = Self.abcState()  // "abc": 3 bytes
    #expect(throws: Never.self) { try Digest(restoringSHA256: good, byteCount: 3) }
    #expect(throws: CryptoError.self) { try Digest(restoringSHA256: good, byteCount: 4) }
    #expect(throws: CryptoError.self) { try Digest(restoringSHA256: good, byteCount: 3 + 64) }
    let resumed = try Digest(restoringSHA256: good, byteCount: 3)
    #expect(resumed.finalize() == Digest.hash(.sha256, Array("abc".utf8)))
  }

  @Test func savedStateOfAnotherAlgorithmIsAProgrammingError() async {
    await #expect(processExitsWith: .failure) {
      _ = Digest(.md5).savedState()
    }
  }
}
