import Foundation
import LarderCrypto
import LarderTestSupport
import Testing

@testable import Larder
@testable import LarderS3
@testable import LarderS3Store

/// The content-store contract (``ContentStore``, the one seam for bytes), run against both
/// stores: files in the data directory and objects in a bucket.
struct ContentStoreTests {
  enum Kind: String, CaseIterable, CustomTestStringConvertible {
    case filesystem, s3
    var testDescription: String { rawValue }
  }

  /// A store of `kind` in a new directory; nil when `kind` is S3 and no engine is installed.
  static func make(_ kind: Kind) throws -> Larder? {
    switch kind {
    case .filesystem:
      return try Larder.temporary(configuration: .init(backgroundMD5: false))
    case .s3:
      guard LoopbackS3.isAvailable else { return nil }
      let engine = try LoopbackS3.engine()
      let directory = Larder.newTemporaryDirectory()
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
      let credentials = directory.appendingPathComponent("credentials")
      try "aws_access_key_id = \(engine.accessKeyID)\naws_secret_access_key = \(engine.secretAccessKey)\n"
        .write(to: credentials, atomically: true, encoding: .utf8)
      let prefix = "c" + UUID().uuidString.lowercased().prefix(18).replacingOccurrences(of: "-", with: "")
      return try Larder.temporary(
        at: directory,
        configuration: .init(
          backgroundMD5: false, blobs: .s3(url: engine.url + "&prefix=\(prefix)", credentialsFile: credentials.path),
          backends: [.s3]))
    }
  }

  static func read(_ larder: Larder, _ sha256: [UInt8], range: Range<Int64>? = nil) throws -> [UInt8] {
    var out: [UInt8] = []
    try larder.content.read(sha256, range: range) { out.append(contentsOf: $0) }
    return out
  }

  static func address(of sha256: [UInt8], in larder: Larder) throws -> BlobAddress? {
    try larder.catalog.read { db in
      try db.row("SELECT fence FROM blobs WHERE sha256 = ?", [sha256])?.int("fence").map {
        BlobAddress(sha256: sha256, fence: $0)
      }
    }
  }

  @Test(arguments: Kind.allCases)
  func committedContentReadsBackExactlyAndIsRemovedWithItsRow(kind: Kind) throws {
    guard let larder = try Self.make(kind) else { return }
    var bytes = [UInt8](repeating: 0, count: 300_000)
    for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i &* 31 &+ i >> 8) }
    bytes += Array(UUID().uuidString.utf8)  // unique content: the S3 bucket is shared between runs
    let file = try larder.files.put(Data(bytes))
    let sha256 = Digest.hash(.sha256, bytes)
    let address = try #require(try Self.address(of: sha256, in: larder))
    // S3 addresses carry a fence of their own; the filesystem has fence 0 only.
    #expect((address.fence == 0) == (kind == .filesystem))
    #expect(try larder.content.inspect(address)?.size == Int64(bytes.count))
    if kind == .s3 { #expect(try larder.content.inspect(BlobAddress(hex: Hex.encode(sha256))) == nil) }

    #expect(try Self.read(larder, sha256) == bytes)
    #expect(try Self.read(larder, sha256, range: 1000..<1010) == Array(bytes[1000..<1010]))
    #expect(try Self.read(larder, sha256, range: 5..<5) == [])
    let size = Int64(bytes.count)
    #expect(try Self.read(larder, sha256, range: size - 5..<size + 100) == Array(bytes.suffix(5)))
    #expect(try Self.read(larder, sha256, range: size + 10..<size + 20) == [])
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    let deep = try #require(try larder.content.digest(address, md5: true, deep: true, buffer: &buffer))
    #expect(deep.sha256 == sha256 && deep.bytes == size && deep.md5 == Digest.hash(.md5, bytes))
    // A local file is always re-read; a remote object only when asked to go deep.
    let shallow = try larder.content.digest(address, md5: false, deep: false, buffer: &buffer)
    #expect((shallow != nil) == (kind == .filesystem))

    // Nothing references the content once its file row goes: the collector's delete takes the
    // row and its bytes, and a second delete finds nothing.
    _ = try larder.catalog.write { db in try db.execute("DELETE FROM files WHERE id = ?", [file.id]) }
    let removed = try larder.content.removeUnreferenced([sha256], faults: .none)
    #expect(removed.blobs == 1 && removed.bytes == size)
    #expect(try larder.content.removeUnreferenced([sha256], faults: .none).blobs == 0)
    #expect(try larder.content.inspect(address) == nil)
    #expect(try larder.content.recover(dryRun: true) == ContentRecovery())
    // Removed content reads as missing on every store (S3's 404 included).
    let missing = #expect(throws: LarderError.self) { try Self.read(larder, sha256) }
    guard case .io(_, _, let code)? = missing else {
      Issue.record("reading removed content: \(String(describing: missing)), expected an ENOENT io error")
      return
    }
    #expect(code == ENOENT)
  }

  @Test(arguments: Kind.allCases)
  func emptyContentIsABlobToo(kind: Kind) throws {
    guard let larder = try Self.make(kind) else { return }
    _ = try larder.files.put(Data())
    let sha256 = Digest.hash(.sha256, [])
    let address = try #require(try Self.address(of: sha256, in: larder))
    #expect(try larder.content.inspect(address)?.size == 0)
    #expect(try Self.read(larder, sha256) == [])
  }

  @Test func s3StoreNamesItsLocationWithoutCredentials() throws {
    let larder = try Larder.temporary()
    let store = try S3ContentStore(
      url: "s3://larder?endpoint=http://127.0.0.1:9&path-style=1", catalog: larder.catalog,
      environment: ["AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "very-secret"])
    #expect(store.location == "s3://larder?endpoint=http://127.0.0.1:9&region=us-east-1&path-style=1")
    #expect(throws: S3ConfigurationError.self) {
      try S3ContentStore(url: "s3://larder", catalog: larder.catalog, environment: [:])
    }
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
