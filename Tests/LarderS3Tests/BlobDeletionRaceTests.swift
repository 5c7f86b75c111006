import Foundation
import LarderCrypto
import LarderTestSupport
import Synchronization
import Testing

@testable import Larder

/// The race between a writer's PUT (made before its write transaction) and a collector's
/// DELETE, forced step by step on a real store: the collector runs at the exact moment between
/// the writer's upload and its transaction (the `after-link` fault point, which in S3 mode sits
/// there). Each test fails without fencing (ARCHITECTURE.md, "Fenced deletion"): were the writer to
/// reuse the address it read or uploaded to, the commit would reference an object the collector had just
/// deleted, and verify would report it missing.
@Suite(.enabled(if: LoopbackS3.isAvailable, "needs the loopback S3 engine"))
struct BlobDeletionRaceTests {
  /// Runs `body` once, the first time the writer reaches the point between its PUT and its
  /// transaction.
  final class Hook: Sendable {
    private let pending = Mutex<(@Sendable () throws -> Void)?>(nil)
    func arm(_ body: @escaping @Sendable () throws -> Void) { pending.withLock { $0 = body } }
    var faults: FaultInjector {
      FaultInjector { [self] point in
        guard point == .afterLink, let body = pending.withLock({ p in defer { p = nil }; return p }) else { return }
        try body()
      }
    }
  }

  /// A store whose blobs are a fresh prefix of the test bucket; `directory` shares one.
  static func store(at directory: URL, prefix: String, faults: FaultInjector = .none) throws -> Larder {
    let engine = try LoopbackS3.engine()
    let credentials = directory.deletingLastPathComponent().appendingPathComponent("\(prefix).credentials")
    try "aws_access_key_id = \(engine.accessKeyID)\naws_secret_access_key = \(engine.secretAccessKey)\n"
      .write(to: credentials, atomically: true, encoding: .utf8)
    return try TestStore.open(
      at: directory,
      configuration: .init(
        faults: faults, backgroundMD5: false,
        blobs: .s3(url: engine.url + "&prefix=\(prefix)", credentialsFile: credentials.path)))
  }

  static func fresh() -> (URL, String) {
    let id = UUID().uuidString.lowercased().prefix(18).replacingOccurrences(of: "-", with: "")
    return (FileManager.default.temporaryDirectory.appendingPathComponent("larder-race-\(id)"), "r\(id)")
  }

  static func content(_ seed: UInt8, _ count: Int = 70_000) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
  }

  static func sha(_ bytes: [UInt8]) -> String { Hex.encode(Digest.hash(.sha256, bytes)) }

  /// Where the row of `bytes` says its object is (nil: no row).
  static func address(of bytes: [UInt8], in larder: Larder) throws -> BlobAddress? {
    let digest = Digest.hash(.sha256, bytes)
    return try larder.catalog.read { db in
      try db.row("SELECT fence FROM blobs WHERE sha256 = ?", [digest])?.int("fence").map {
        BlobAddress(hex: Hex.encode(digest), fence: $0)
      }
    }
  }

  static func count(_ table: String, in larder: Larder) throws -> Int64? {
    try larder.catalog.read { db in try db.row("SELECT count(*) AS n FROM \(table)")?.int("n") }
  }

  static let now = GarbageCollector.Options(grace: .zero, tempAge: .zero)

  /// Proves the floor: a stray pass may delete an uploaded object whose commit is late only
  /// once it raised the floor past that object's fence, and then the writer's transaction sees
  /// it below the floor and uploads again to a fresh fence.
  @Test func aStrayDeletionBetweenThePutAndTheCommitIsUploadedAgain() throws {
    let (directory, prefix) = Self.fresh()
    defer { try? FileManager.default.removeItem(at: directory) }
    let hook = Hook()
    let larder = try Self.store(at: directory, prefix: prefix, faults: hook.faults)
    let bytes = Self.content(1)
    let reports = Mutex<[GCReport]>([])
    hook.arm {
      // The object is there, no row claims it yet: to the collector it is a stray (once its
      // LastModified, which Swift rounds up to the second, is in the past). The first pass
      // marks the fences handed out so far; the second raises the floor past them.
      Thread.sleep(forTimeInterval: 1.1)
      for _ in 0..<2 {
        let r = try GarbageCollector(larder: larder).collect(options: Self.now)
        reports.withLock { $0.append(r) }
      }
    }
    let object = try larder.objects.put(bucket: "app", name: "a.bin", data: Data(bytes))
    #expect(reports.withLock { $0.map(\.strayFilesRemoved) } == [0, 1])
    let address = try #require(try Self.address(of: bytes, in: larder))
    #expect(address.fence > 1)
    #expect(try larder.content.inspect(address)?.size == Int64(bytes.count))
    #expect(try larder.files.data(of: object.file) == Data(bytes))
    let verify = try Verifier(larder: larder, deep: true).verify()
    #expect(verify.findings.map(\.kind) == [])
    #expect(verify.blobsChecked == 1)
  }

  /// Proves fencing of orphans: the row the writer read is deleted (and its object) between the
  /// writer's read and its transaction; the transaction finds no row and uploads to a fresh fence.
  @Test func anOrphanDeletionOfARowTheWriterDedupedAgainstIsUploadedAgain() throws {
    let (directory, prefix) = Self.fresh()
    defer { try? FileManager.default.removeItem(at: directory) }
    let hook = Hook()
    let larder = try Self.store(at: directory, prefix: prefix, faults: hook.faults)
    let bytes = Self.content(2)
    // An unattached file: its row and object exist, so the writer below skips its PUT.
    _ = try larder.files.put(Data(bytes))
    let before = try #require(try Self.address(of: bytes, in: larder))
    Thread.sleep(forTimeInterval: 0.01)
    let report = Mutex<GCReport?>(nil)
    hook.arm {
      let r = try GarbageCollector(larder: larder).collect(options: Self.now)
      report.withLock { $0 = r }
    }
    let object = try larder.objects.put(bucket: "app", name: "b.bin", data: Data(bytes))
    #expect(report.withLock { $0?.filesReleased } == 1)
    #expect(report.withLock { $0?.blobsRemoved } == 1)
    let after = try #require(try Self.address(of: bytes, in: larder))
    #expect(after.fence > before.fence)
    #expect(try larder.content.inspect(before)?.size == nil)
    #expect(try larder.content.inspect(after)?.size == Int64(bytes.count))
    #expect(try larder.files.data(of: object.file) == Data(bytes))
    #expect(try Verifier(larder: larder, deep: true).verify().findings.map(\.kind) == [])
  }

  /// Proves the committed intents: a collector that dies between its intents' commit and the
  /// end of its DELETEs leaves intents (no rows), the next run finishes them without counting
  /// the blobs twice, and a writer meanwhile uploads to a fresh fence.
  @Test func aCollectorDyingMidDeletionLeavesIntentsTheNextRunFinishes() throws {
    let (directory, prefix) = Self.fresh()
    defer { try? FileManager.default.removeItem(at: directory) }
    struct Died: Error {}
    let collector = try Self.store(
      at: directory, prefix: prefix, faults: FaultInjector { if $0 == .gcMidBatch { throw Died() } })
    let writer = try Self.store(at: directory, prefix: prefix)
    let contents = [Self.content(3), Self.content(4)].sorted { Self.sha($0) < Self.sha($1) }
    for bytes in contents { _ = try writer.files.put(Data(bytes)) }
    let old = try contents.map { try #require(try Self.address(of: $0, in: writer)) }
    Thread.sleep(forTimeInterval: 0.01)
    #expect(throws: Died.self) { try GarbageCollector(larder: collector).collect(options: Self.now) }
    // Phase A committed: both rows gone, both intents there; the first object is gone.
    #expect(try Self.count("blobs", in: writer) == 0)
    #expect(try Self.count("blob_deletions", in: writer) == 2)
    #expect(try writer.content.inspect(old[0])?.size == nil)
    #expect(try writer.content.inspect(old[1])?.size == Int64(contents[1].count))
    // A writer finds no row and uploads to a fresh fence.
    let object = try writer.objects.put(bucket: "app", name: "c.bin", data: Data(contents[0]))
    #expect(try writer.files.data(of: object.file) == Data(contents[0]))
    let fresh = try #require(try Self.address(of: contents[0], in: writer))
    #expect(fresh != old[0])
    // The next collection finishes both intents and counts no blob again.
    let report = try GarbageCollector(larder: writer).collect(options: Self.now)
    #expect(report.deletionsResumed == 2)
    #expect(report.filesReleased == 0)
    #expect(report.blobsRemoved == 0)
    #expect(try Self.count("blob_deletions", in: writer) == 0)
    #expect(try writer.content.inspect(old[1])?.size == nil)
    #expect(try writer.content.inspect(fresh)?.size == Int64(contents[0].count))
    let verify = try Verifier(larder: writer, deep: true).verify()
    #expect(verify.findings.map(\.kind) == [])
    #expect(verify.blobsChecked == 1)
  }

  @Test func anUnreachableStoreRefusesTheWriteAndCommitsNothing() throws {
    let (directory, _) = Self.fresh()
    defer { try? FileManager.default.removeItem(at: directory) }
    // Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let credentials = directory.appendingPathComponent("credentials")
    try "aws_access_key_id = k\naws_secret_access_key = s\n".write(to: credentials, atomically: true, encoding: .utf8)
    let larder = try TestStore.open(
      at: directory,
      configuration: .init(
        backgroundMD5: false,
        blobs: .s3(url: "s3://larder-test?endpoint=http://127.0.0.1:9&path-style=1", credentialsFile: credentials.path)))
    #expect {
      _ = try larder.objects.put(bucket: "app", name: "x.bin", data: Data(Self.content(5)))
    } throws: { error in
      guard case LarderError.blobStoreUnavailable(let detail) = error else { return false }
      return !detail.contains("aws_secret") && !detail.isEmpty
    }
    let counts = try larder.catalog.read { db in
      try ["blobs", "files", "objects"].map { try db.row("SELECT count(*) AS n FROM \($0)")?.int("n") }
    }
    #expect(counts == [0, 0, 0])
  }
}
