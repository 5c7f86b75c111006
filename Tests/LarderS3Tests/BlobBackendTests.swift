import Foundation
import Larder
import LarderS3Store
import LarderCrypto
import LarderTestSupport
import Testing

@testable import LarderS3

/// The blob-backend contract, run against both backends: the data directory and a bucket.
struct BlobBackendTests {
  enum Kind: String, CaseIterable, CustomTestStringConvertible {
    case filesystem, s3
    var testDescription: String { rawValue }
  }

  /// A backend of `kind` over an empty store, and a temporary store that stages content; nil
  /// when `kind` is S3 and no engine is installed (the SKIPPED line says so).
  static func make(_ kind: Kind) throws -> (backend: any BlobBackend, stager: Larder, bucketPrefix: String)? {
    let stager = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    switch kind {
    case .filesystem:
      return (FilesystemBlobBackend(store: stager.blobs), stager, "")
    case .s3:
      guard LoopbackS3.isAvailable else { return nil }
      let engine = try LoopbackS3.engine()
      // A bucket of its own per run would need bucket creation; the test bucket is shared, so
      // the listing assertions look only at the blobs this test published.
      let backend = try S3BlobBackend(
        url: engine.url,
        environment: [
          "AWS_ACCESS_KEY_ID": engine.accessKeyID, "AWS_SECRET_ACCESS_KEY": engine.secretAccessKey,
        ])
      return (backend, stager, "")
    }
  }

  static func stage(_ bytes: [UInt8], in larder: Larder) throws -> StagedBlob {
    let writer = try larder.files.makeWriter()
    try writer.write(bytes)
    return try writer.finish()
  }

  static func read(_ backend: any BlobBackend, _ hex: String, range: Range<Int64>? = nil) throws -> [UInt8] {
    var out: [UInt8] = []
    try backend.read(blob: hex, range: range) { out.append(contentsOf: $0) }
    return out
  }

  @Test(arguments: Kind.allCases)
  func publishedBlobReadsBackExactlyAndIsListed(kind: Kind) throws {
    guard let (backend, stager, _) = try Self.make(kind) else { return }
    var bytes = [UInt8](repeating: 0, count: 300_000)
    for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i &* 31 &+ i >> 8) }
    bytes += Array(UUID().uuidString.utf8)  // unique content: the S3 bucket is shared between runs
    let staged = try Self.stage(bytes, in: stager)
    let hex = staged.sha256Hex
    #expect(try backend.storedSize(ofBlob: hex) == nil)

    try backend.publish(staged)
    #expect(try backend.storedSize(ofBlob: hex) == Int64(bytes.count))
    let whole = try Self.read(backend, hex)
    #expect(whole == bytes)
    #expect(Hex.encode(Digest.hash(.sha256, whole)) == hex)
    #expect(try Self.read(backend, hex, range: 1000..<1010) == Array(bytes[1000..<1010]))
    #expect(try Self.read(backend, hex, range: 5..<5) == [])
    let size = Int64(bytes.count)
    #expect(try Self.read(backend, hex, range: size - 5..<size + 100) == Array(bytes.suffix(5)))
    #expect(try Self.read(backend, hex, range: size + 10..<size + 20) == [])

    var listed: [String: Int64] = [:]
    try backend.forEachStoredBlob { listed[$0] = $1 }
    #expect(listed[hex] == Int64(bytes.count))

    try backend.remove(blob: hex)
    try backend.remove(blob: hex)
    #expect(try backend.storedSize(ofBlob: hex) == nil)
    #expect(throws: (any Error).self) { try Self.read(backend, hex) }
  }

  @Test(arguments: Kind.allCases)
  func emptyContentIsABlobToo(kind: Kind) throws {
    guard let (backend, stager, _) = try Self.make(kind) else { return }
    let staged = try Self.stage([], in: stager)
    try backend.publish(staged)
    #expect(try backend.storedSize(ofBlob: staged.sha256Hex) == 0)
    #expect(try Self.read(backend, staged.sha256Hex) == [])
    // Empty content is shared by every test that stores it: not removed here.
  }

  @Test func s3BackendNamesItsLocationWithoutCredentials() throws {
    let backend = try S3BlobBackend(
      url: "s3://larder?endpoint=http://127.0.0.1:9&path-style=1",
      environment: ["AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "very-secret"])
    #expect(backend.location == "s3://larder?endpoint=http://127.0.0.1:9&region=us-east-1&path-style=1")
    #expect(!backend.publishesInsideTransaction)
    #expect(throws: S3ConfigurationError.self) { try S3BlobBackend(url: "s3://larder", environment: [:]) }
  }

  @Test func addressesAreTheFanOutKeys() {
    let hex = String(repeating: "ab", count: 32)
    #expect(BlobAddress.key(forHex: hex) == "sha256/ab/ab/\(hex)")
    #expect(BlobAddress.hex(ofKey: "sha256/ab/ab/\(hex)") == hex)
    #expect(BlobAddress.hex(ofKey: "sha256/ab/cd/\(hex)") == nil)
    #expect(BlobAddress.hex(ofKey: "sha256/ab/ab/\(hex.uppercased())") == nil)
    #expect(BlobAddress.hex(ofKey: "other/ab/ab/\(hex)") == nil)
    #expect(BlobAddress.hex(ofKey: "sha256/ab/ab/\(hex)/x") == nil)
  }
}
