import Foundation
import LarderCrypto
import LarderTestSupport

@testable import LarderS3

/// A client on the test engine, and a key prefix of its own so tests never see each other's objects.
struct S3Fixture {
  let client: S3Client
  let prefix = "t-\(UUID().uuidString.lowercased())/"
  let scratch: URL

  init(tuning: S3Client.Tuning = .init(), credentials: S3Credentials? = nil) throws {
    let engine = try LoopbackS3.engine()
    client = S3Client(
      configuration: try S3Configuration(url: engine.url),
      credentials: credentials
        ?? S3Credentials(accessKeyID: engine.accessKeyID, secretAccessKey: engine.secretAccessKey),
      tuning: tuning)
    scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-s3-test-\(UUID().uuidString)")
  }

  func key(_ name: String) -> String { prefix + name }

  /// A file of `size` pseudo-random bytes (a cheap generator: tests want many MiB, not secrecy).
  func file(size: Int, seed: UInt64 = 1) throws -> (path: String, bytes: [UInt8], sha256: String) {
    var bytes = [UInt8](repeating: 0, count: size)
    var x = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    for i in 0..<size {
      x ^= x << 13
      x ^= x >> 7
      x ^= x << 17
      bytes[i] = UInt8(truncatingIfNeeded: x)
    }
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    let path = scratch.appendingPathComponent(UUID().uuidString).path
    guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
      throw HarnessFailure("cannot write \(path)")
    }
    return (path, bytes, sha256Hex(bytes))
  }

  /// The whole object (or a range), collected from the streamed chunks, and the largest chunk seen.
  func download(_ key: String, range: ClosedRange<Int64>? = nil) throws -> (bytes: [UInt8], largestChunk: Int)
  {
    var bytes: [UInt8] = []
    var largest = 0
    try client.get(key, range: range) { chunk in
      largest = max(largest, chunk.count)
      bytes.append(contentsOf: chunk)
    }
    return (bytes, largest)
  }

  func cleanUp() {
    try? FileManager.default.removeItem(at: scratch)
  }
}

func sha256Hex(_ bytes: [UInt8]) -> String { Hex.encode(Digest.hash(.sha256, bytes)) }
func md5Hex(_ bytes: [UInt8]) -> String { Hex.encode(Digest.hash(.md5, bytes)) }
