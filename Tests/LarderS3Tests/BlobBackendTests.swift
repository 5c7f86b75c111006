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

  static func read(_ backend: any BlobBackend, _ address: BlobAddress, range: Range<Int64>? = nil) throws -> [UInt8] {
    var out: [UInt8] = []
    try backend.read(address, range: range) { out.append(contentsOf: $0) }
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
    // S3 keys carry the fence; the filesystem has fence 0 only.
    let fence: Int64 = kind == .s3 ? 42 : 0
    let address = BlobAddress(hex: hex, fence: fence)
    #expect(try backend.storedSize(of: address) == nil)

    try backend.publish(staged, at: address)
    #expect(try backend.storedSize(of: address) == Int64(bytes.count))
    if kind == .s3 { #expect(try backend.storedSize(of: BlobAddress(hex: hex)) == nil) }
    let whole = try Self.read(backend, address)
    #expect(whole == bytes)
    #expect(Hex.encode(Digest.hash(.sha256, whole)) == hex)
    #expect(try Self.read(backend, address, range: 1000..<1010) == Array(bytes[1000..<1010]))
    #expect(try Self.read(backend, address, range: 5..<5) == [])
    let size = Int64(bytes.count)
    #expect(try Self.read(backend, address, range: size - 5..<size + 100) == Array(bytes.suffix(5)))
    #expect(try Self.read(backend, address, range: size + 10..<size + 20) == [])

    var listed: [BlobAddress: Int64] = [:]
    try backend.forEachStoredBlob { listed[$0] = $1 }
    #expect(listed[address] == Int64(bytes.count))

    try backend.remove(address)
    try backend.remove(address)
    #expect(try backend.storedSize(of: address) == nil)
    // A removed blob reads as a missing file on every backend (S3's 404 included).
    let missing = #expect(throws: LarderError.self) { try Self.read(backend, address) }
    guard case .io(_, _, let code)? = missing else {
      Issue.record("reading a removed blob: \(String(describing: missing)), expected an ENOENT io error")
      return
    }
    #expect(code == ENOENT)
  }

  @Test(arguments: Kind.allCases)
  func emptyContentIsABlobToo(kind: Kind) throws {
    guard let (backend, stager, _) = try Self.make(kind) else { return }
    let staged = try Self.stage([], in: stager)
    let address = BlobAddress(hex: staged.sha256Hex)
    try backend.publish(staged, at: address)
    #expect(try backend.storedSize(of: address) == 0)
    #expect(try Self.read(backend, address) == [])
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

  /// Fence 0 is the key every blob had before fences (backward compatible); any other fence
  /// is a decimal suffix, parsed back only in its one canonical spelling.
  @Test func addressesAreTheFanOutKeysWithTheFence() {
    let hex = String(repeating: "ab", count: 32)
    #expect(BlobAddress.key(forHex: hex) == "sha256/ab/ab/\(hex)")
    #expect(BlobAddress(hex: hex).key == "sha256/ab/ab/\(hex)")
    #expect(BlobAddress(hex: hex, fence: 17).key == "sha256/ab/ab/\(hex).17")
    #expect(BlobAddress(key: "sha256/ab/ab/\(hex)") == BlobAddress(hex: hex))
    #expect(BlobAddress(key: "sha256/ab/ab/\(hex).17") == BlobAddress(hex: hex, fence: 17))
    for bad in [
      "sha256/ab/cd/\(hex)", "sha256/ab/ab/\(hex.uppercased())", "other/ab/ab/\(hex)", "sha256/ab/ab/\(hex)/x",
      "sha256/ab/ab/\(hex).", "sha256/ab/ab/\(hex).017", "sha256/ab/ab/\(hex).0", "sha256/ab/ab/\(hex).-1",
      "sha256/ab/ab/\(hex).1x", "sha256/ab/ab/\(hex)x", "sha256/ab/ab/\(hex).99999999999999999999",
    ] {
      #expect(BlobAddress(key: bad) == nil, "\(bad)")
    }
  }
}
