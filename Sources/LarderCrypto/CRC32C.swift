import CCRC32C
import Foundation

/// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78), as Google Cloud Storage
/// reports it in `crc32c` and `x-goog-hash: crc32c=…`: the base64 of the 4 bytes, big-endian.
///
/// With the CPU's `crc32` instruction where it has one (SSE 4.2, through the header-only
/// `CCRC32C`; three streams at once over long inputs), else table-driven slice-by-8 in Swift (eight bytes per step, eight 256-entry
/// tables); no C library is linked either way:
///
/// ```swift
/// var crc = CRC32C()
/// crc.update(chunk)          // any number of times
/// crc.base64                 // "yZRlqg==" for "The quick brown fox jumps over the lazy dog"
/// ```
public struct CRC32C: Sendable, Equatable {
  /// The running register (inverted), as the algorithm keeps it.
  private var state: UInt32 = 0xFFFF_FFFF

  public init() {}

  /// The checksum of the bytes seen so far.
  public var value: UInt32 { ~state }

  /// The checksum's 4 bytes, big-endian.
  public var bytes: [UInt8] { Self.bytes(value) }

  /// Base64 of the big-endian bytes: GCS's `crc32c` field.
  public var base64: String { Data(bytes).base64EncodedString() }

  /// `value` as 4 bytes, big-endian.
  public static func bytes(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
  }

  /// The checksum of `bytes`, at once.
  public static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
    var crc = CRC32C()
    crc.update(Array(bytes))
    return crc.value
  }

  public mutating func update(_ bytes: [UInt8]) {
    bytes.withUnsafeBytes { update($0) }
  }

  public mutating func update(_ buffer: UnsafeRawBufferPointer) {
    guard let p = buffer.baseAddress, !buffer.isEmpty else { return }
    if Self.hardware {
      state = Self.blockShift.withUnsafeBufferPointer { larder_crc32c_update3(state, p, buffer.count, $0.baseAddress) }
    } else {
      state = Self.tableUpdate(state, buffer)
    }
  }

  /// Whether this CPU computes CRC-32C itself (SSE 4.2).
  public static let hardware = larder_crc32c_hardware() != 0

  /// `larder_crc32c_update3`'s table: a register moved over one block of zero bytes, by byte
  /// (4 × 256). The move is linear, so a register's is the XOR of its bits' moves, and each bit's
  /// is the instruction run over the block's zeros.
  private static let blockShift: [UInt32] = {
    guard hardware else { return [] }
    let zeros = [UInt8](repeating: 0, count: Int(LARDER_CRC32C_BLOCK))
    let bits: [UInt32] = (0..<32).map { bit in
      zeros.withUnsafeBytes { larder_crc32c_update(UInt32(1) << UInt32(bit), $0.baseAddress, $0.count) }
    }
    var table = [UInt32](repeating: 0, count: 4 * 256)
    for k in 0..<4 {
      for byte in 0..<256 {
        var moved: UInt32 = 0
        for i in 0..<8 where byte & (1 << i) != 0 { moved ^= bits[k * 8 + i] }
        table[k * 256 + byte] = moved
      }
    }
    return table
  }()

  /// `crc` continued over `buffer` by the tables: the path of CPUs without the instruction, and
  /// the tests' reference for the one with it.
  package static func tableUpdate(_ crc: UInt32, _ buffer: UnsafeRawBufferPointer) -> UInt32 {
    guard var p = buffer.baseAddress, !buffer.isEmpty else { return crc }
    var remaining = buffer.count
    var crc = crc
    Self.tables.withUnsafeBufferPointer { tables in
      let t = tables.baseAddress!
      let (t1, t2, t3, t4, t5, t6, t7) = (t + 256, t + 512, t + 768, t + 1024, t + 1280, t + 1536, t + 1792)
      // Byte by byte up to an 8-byte boundary, then 8 at a time, then the tail.
      while remaining > 0 && UInt(bitPattern: p) & 7 != 0 {
        crc = t[Int((crc ^ UInt32(p.load(as: UInt8.self))) & 0xFF)] ^ (crc >> 8)
        p += 1
        remaining &-= 1
      }
      while remaining >= 8 {
        let word = UInt64(littleEndian: p.load(as: UInt64.self))
        let lo = UInt32(truncatingIfNeeded: word) ^ crc
        let hi = UInt32(truncatingIfNeeded: word &>> 32)
        crc =
          t7[Int(lo & 0xFF)] ^ t6[Int((lo &>> 8) & 0xFF)] ^ t5[Int((lo &>> 16) & 0xFF)] ^ t4[Int(lo &>> 24)]
          ^ t3[Int(hi & 0xFF)] ^ t2[Int((hi &>> 8) & 0xFF)] ^ t1[Int((hi &>> 16) & 0xFF)] ^ t[Int(hi &>> 24)]
        p += 8
        remaining &-= 8
      }
      while remaining > 0 {
        crc = t[Int((crc ^ UInt32(p.load(as: UInt8.self))) & 0xFF)] ^ (crc >> 8)
        p += 1
        remaining &-= 1
      }
    }
    return crc
  }

  /// Eight tables of 256, one after another: `t[k][b]` is the CRC of byte `b` followed by `k` zero bytes.
  private static let tables: [UInt32] = {
    var t = [UInt32](repeating: 0, count: 8 * 256)
    for b in 0..<256 {
      var crc = UInt32(b)
      for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
      t[b] = crc
    }
    for k in 1..<8 {
      for b in 0..<256 {
        let previous = t[(k - 1) * 256 + b]
        t[k * 256 + b] = (previous >> 8) ^ t[Int(previous & 0xFF)]
      }
    }
    return t
  }()
}
