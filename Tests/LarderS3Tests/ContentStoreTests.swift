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
  static func make(_ kind: Kind, faults: FaultInjector = .none) throws -> Larder? {
    guard kind == .filesystem || LoopbackS3.isAvailable else { return nil }
    let directory = Larder.newTemporaryDirectory()
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let prefix = "c" + UUID().uuidString.lowercased().prefix(18).replacingOccurrences(of: "-", with: "")
    return try Larder.temporary(at: directory, configuration: try configuration(kind, directory, prefix, faults))
  }

  /// The configuration of a store of `kind` in `directory` (its blobs under `prefix` in S3).
  static func configuration(_ kind: Kind, _ directory: URL, _ prefix: String, _ faults: FaultInjector = .none) throws
    -> Larder.Configuration
  {
    guard kind == .s3 else { return .init(faults: faults, backgroundMD5: false) }
    let engine = try LoopbackS3.engine()
    let credentials = directory.appendingPathComponent("credentials")
    try "aws_access_key_id = \(engine.accessKeyID)\naws_secret_access_key = \(engine.secretAccessKey)\n"
      .write(to: credentials, atomically: true, encoding: .utf8)
    return .init(
      faults: faults, backgroundMD5: false,
      blobs: .s3(url: engine.url + "&prefix=\(prefix)", credentialsFile: credentials.path), backends: [.s3])
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

  /// What a collection that died leaves is settled by the content store's one `recover()`,
  /// which the store runs at open (and gc and verify run first): on the filesystem, trash
  /// entries (one whose row survived goes back, one no row names goes); in S3, the deletion
  /// intents the collection committed and did not carry out (their objects go, then the
  /// intents). Before, opening an S3 store left the intents for the next collection.
  @Test(arguments: Kind.allCases)
  func whatACollectionThatDiedLeftIsRecoveredByTheOneRecoverAtOpen(kind: Kind) throws {
    guard LoopbackS3.isAvailable || kind == .filesystem else { return }
    struct Died: Error {}
    let directory = Larder.newTemporaryDirectory()
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let prefix = "r" + UUID().uuidString.lowercased().prefix(18).replacingOccurrences(of: "-", with: "")
    let died = FaultInjector { if $0 == .gcMidBatch { throw Died() } }
    var store: Larder? = try Larder(at: directory, configuration: try Self.configuration(kind, directory, prefix, died))
    let larder = try #require(store)
    let salt = UUID().uuidString
    let kept = Array("kept \(salt)".utf8)
    let collected = [Array("collected one \(salt)".utf8), Array("collected two \(salt)".utf8)]
    let keptObject = try larder.objects.put(bucket: "app", name: "kept.txt", data: Data(kept))
    for bytes in collected { _ = try larder.files.put(Data(bytes)) }
    let collectedAddresses = try collected.map { try #require(try Self.address(of: Digest.hash(.sha256, $0), in: larder)) }
    var expected = ContentRecovery()
    switch kind {
    case .filesystem:
      // A collection that died between moving a blob to trash/ and its commit (the row is
      // still there), and one that died after its commit, before unlinking (no row).
      let keptHex = Hex.encode(Digest.hash(.sha256, kept))
      let trash = larder.blobs.trashDirectory.path
      #expect(rename(larder.blobs.path(forHex: keptHex), "\(trash)/\(keptHex)") == 0)
      let leftover = String(repeating: "0", count: 64)
      try Data("collected, row gone".utf8).write(to: URL(fileURLWithPath: "\(trash)/\(leftover)"))
      expected = ContentRecovery(restored: ["\(trash)/\(keptHex)"], removed: ["\(trash)/\(leftover)"])
    case .s3:
      // A collector that dies between its intents' commit and the end of its DELETEs.
      try larder.catalog.write { db in try db.execute("DELETE FROM files WHERE id NOT IN (SELECT file_id FROM objects)") }
      #expect(throws: Died.self) {
        try GarbageCollector(larder: larder).collect(options: .init(grace: .zero, tempAge: .zero))
      }
      expected = ContentRecovery(finished: collectedAddresses.map(\.key).sorted())
    }
    var pending = try larder.content.recover(dryRun: true)
    pending.restored.sort()
    pending.removed.sort()
    pending.finished.sort()
    #expect(pending == expected)
    store = nil

    let reopened = try Larder(at: directory, configuration: try Self.configuration(kind, directory, prefix))
    #expect(reopened.recovery.trashRestored == expected.restored.count)
    #expect(reopened.recovery.trashRemoved == expected.removed.count)
    #expect(reopened.recovery.deletionsFinished == expected.finished.count)
    #expect(try reopened.content.recover(dryRun: true) == ContentRecovery())
    #expect(POSIX.listDirectory(reopened.blobs.trashDirectory.path) == [])
    #expect(try reopened.catalog.read { db in try db.row("SELECT count(*) AS n FROM blob_deletions")?.int("n") } == 0)
    if kind == .s3 {
      for address in collectedAddresses { #expect(try reopened.content.inspect(address) == nil) }
    }
    #expect(try reopened.files.data(of: keptObject.file) == Data(kept))
    #expect(try Verifier(larder: reopened, deep: true).verify().findings.map(\.kind) == [])
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
