// CRC32C throughput of LarderCrypto's slice-by-8 (compiled together with CRC32C.swift by run.sh).
import Foundation

let size = 64 << 20
var bytes = [UInt8](repeating: 0, count: size)
var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
for i in bytes.indices {
  seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
  bytes[i] = UInt8(truncatingIfNeeded: seed >> 56)
}
let rounds = Int(CommandLine.arguments.dropFirst().first ?? "5") ?? 5
var best = Double.infinity
var value: UInt32 = 0
for _ in 0..<rounds {
  let start = ContinuousClock.now
  var crc = CRC32C()
  // 1 MiB at a time, as the backfill reads blobs.
  bytes.withUnsafeBytes { all in
    var offset = 0
    while offset < size {
      crc.update(UnsafeRawBufferPointer(rebasing: all[offset..<min(offset + (1 << 20), size)]))
      offset += 1 << 20
    }
  }
  value = crc.value
  let d = ContinuousClock.now - start
  best = min(best, Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
}
print(String(format: "crc32c slice-by-8: %.0f MB/s (best of %d over %d MiB, value %08x)", Double(size) / best / 1e6, rounds, size >> 20, value))
