import LarderCrypto
import Testing

struct ECDSASignatureTests {
  @Test func rawToDERAddsSignBytesAndStripsLeadingZeros() {
    let r = [UInt8](repeating: 0x01, count: 32)
    let s = [0x80] + [UInt8](repeating: 0, count: 31)
    let der = ECDSASignature.der(fromRaw: r + s)
    #expect(der == [0x30, 0x45, 0x02, 0x20] + r + [0x02, 0x21, 0x00] + s)

    let smallR = [UInt8](repeating: 0, count: 31) + [0x05]
    let smallS = [UInt8](repeating: 0, count: 30) + [0x7f, 0xff]
    #expect(
      ECDSASignature.der(fromRaw: smallR + smallS) == [0x30, 0x07, 0x02, 0x01, 0x05, 0x02, 0x02, 0x7f, 0xff])
  }

  @Test func refusesWrongLengthsAndZeroHalves() {
    #expect(ECDSASignature.der(fromRaw: [UInt8](repeating: 1, count: 63)) == nil)
    #expect(ECDSASignature.der(fromRaw: [UInt8](repeating: 1, count: 65)) == nil)
    #expect(ECDSASignature.der(fromRaw: []) == nil)
    #expect(
      ECDSASignature.der(fromRaw: [UInt8](repeating: 0, count: 32) + [UInt8](repeating: 1, count: 32)) == nil)
    #expect(
      ECDSASignature.der(fromRaw: [UInt8](repeating: 1, count: 32) + [UInt8](repeating: 0, count: 32)) == nil)
  }
}
