// CRC32C throughput of LarderCrypto's two paths, the CPU's instruction (where it has SSE 4.2) and
// the slice-by-8 tables (compiled together with CRC32C.swift by run.sh).
import Foundation

let size = 64 << 20
var bytes = [UInt8](repeating: 0, count: size)
var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
for i in bytes.indices {
  seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
  bytes[i] = UInt8(truncatingIfNeeded: seed >> 56)
}
let rounds = Int(CommandLine.arguments.dropFirst().first ?? "5") ?? 5

/// Best MB/s of `update` over the buffer, 1 MiB at a time, as uploads and the backfill feed it.
func measure<S>(_ name: String, _ initial: S, _ update: (inout S, UnsafeRawBufferPointer) -> Void, _ result: (S) -> UInt32) {
  var best = Double.infinity
  var value: UInt32 = 0
  for _ in 0..<rounds {
    let start = ContinuousClock.now
    var crc = initial
    bytes.withUnsafeBytes { all in
      var offset = 0
      while offset < size {
        update(&crc, UnsafeRawBufferPointer(rebasing: all[offset..<min(offset + (1 << 20), size)]))
        offset += 1 << 20
      }
    }
    value = result(crc)
    let d = ContinuousClock.now - start
    best = min(best, Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
  }
  print(String(format: "crc32c %@: %.0f MB/s (best of %d over %d MiB, value %08x)", name, Double(size) / best / 1e6, rounds, size >> 20, value))
}

if CRC32C.hardware {
  measure("instruction (SSE 4.2)", CRC32C(), { $0.update($1) }, \.value)
} else {
  print("crc32c instruction: this CPU has no SSE 4.2")
}
measure("slice-by-8 tables", UInt32(0xFFFF_FFFF), { $0 = CRC32C.tableUpdate($0, $1) }, { ~$0 })
