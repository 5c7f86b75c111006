import Foundation
import LarderCrypto

/// Deterministic pseudo-random bytes (xorshift64), so contents differ per seed, are reproducible,
/// and a shorter run is a prefix of a longer one with the same seed.
func testBytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
  var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
  var out = [UInt8](repeating: 0, count: count)
  out.withUnsafeMutableBytes { raw in
    var i = 0
    while i < count {
      state ^= state << 13
      state ^= state >> 7
      state ^= state << 17
      var word = state
      for _ in 0..<8 where i < count {
        raw[i] = UInt8(truncatingIfNeeded: word)
        word >>= 8
        i += 1
      }
    }
  }
  return out
}

/// Lowercase hex SHA-256 by LarderCrypto (OpenSSL's libcrypto), not by the server under test.
func sha256Hex(_ bytes: [UInt8]) -> String { Hex.encode(Digest.hash(.sha256, bytes)) }

/// Polls `condition` (server threads act asynchronously) with a generous timeout.
func pollUntil(timeout: Duration = .seconds(30), _ condition: () -> Bool) -> Bool {
  let deadline = ContinuousClock.now + timeout
  while ContinuousClock.now < deadline {
    if condition() { return true }
    usleep(10_000)
  }
  return condition()
}
