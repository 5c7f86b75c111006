import Foundation
import LarderCrypto
import Testing

@Suite struct CRC32CTests {
  static func crc(_ bytes: [UInt8]) -> UInt32 {
    var c = CRC32C()
    c.update(bytes)
    return c.value
  }

  /// The check value of the Castagnoli polynomial and RFC 3720's (iSCSI) test vectors.
  @Test func knownVectors() {
    #expect(Self.crc(Array("123456789".utf8)) == 0xE306_9283)
    #expect(Self.crc([]) == 0)
    #expect(Self.crc([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
    #expect(Self.crc([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
    #expect(Self.crc(Array(0..<32)) == 0x46DD_794E)
    #expect(Self.crc(Array((0..<32).reversed())) == 0x113F_DB5C)
    var c = CRC32C()
    c.update(Array("The quick brown fox jumps over the lazy dog".utf8))
    #expect(c.bytes == [0x22, 0x62, 0x04, 0x04])
    #expect(c.base64 == "ImIEBA==")
  }

  /// Any split into updates, at any alignment, gives the same value as one update.
  @Test func splitsAndAlignmentsDoNotMatter() {
    var rng = SystemRandomNumberGenerator()
    let data = (0..<10_000).map { _ in UInt8.random(in: 0...255, using: &rng) }
    let whole = Self.crc(data)
    for cut in [1, 3, 7, 8, 9, 63, 4096, 9_999] {
      var c = CRC32C()
      c.update(Array(data[..<cut]))
      c.update(Array(data[cut...]))
      #expect(c.value == whole, "cut at \(cut)")
    }
    var bytewise = CRC32C()
    for b in data { bytewise.update([b]) }
    #expect(bytewise.value == whole)
  }

  /// The CPU's instruction (where this machine has it, it must be used) gives the tables' value
  /// for every length up to 300 at every alignment of 8, and for a megabyte continued from a
  /// running register.
  @Test func instructionAgreesWithTables() throws {
    let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
    #expect(CRC32C.hardware == cpuinfo.contains(" sse4_2"))
    var rng = SystemRandomNumberGenerator()
    let data = (0..<(1 << 20) + 8).map { _ in UInt8.random(in: 0...255, using: &rng) }
    data.withUnsafeBytes { all in
      for offset in 0..<8 {
        for length in 0...300 {
          let slice = UnsafeRawBufferPointer(rebasing: all[offset..<offset + length])
          var c = CRC32C()
          c.update(slice)
          #expect(~c.value == CRC32C.tableUpdate(0xFFFF_FFFF, slice), "offset \(offset) length \(length)")
        }
      }
      var c = CRC32C()
      c.update(UnsafeRawBufferPointer(rebasing: all[3..<1000]))
      let running = ~c.value
      c.update(UnsafeRawBufferPointer(rebasing: all[1000...]))
      // Around the three-stream path's threshold (3 blocks of 8,192) and past several rounds of it.
      for length in [24_575, 24_576, 24_577, 49_151, 49_152 + 13, 100_003] {
        for offset in [0, 1, 5, 7] {
          let slice = UnsafeRawBufferPointer(rebasing: all[offset..<offset + length])
          var c = CRC32C()
          c.update(slice)
          #expect(~c.value == CRC32C.tableUpdate(0xFFFF_FFFF, slice), "offset \(offset) length \(length)")
        }
      }
      let head = CRC32C.tableUpdate(0xFFFF_FFFF, UnsafeRawBufferPointer(rebasing: all[3..<1000]))
      let table = CRC32C.tableUpdate(head, UnsafeRawBufferPointer(rebasing: all[1000...]))
      #expect(~c.value == table)
      #expect(running == head)
    }
  }
}
