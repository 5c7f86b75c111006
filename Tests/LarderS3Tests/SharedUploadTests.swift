import Foundation
import LarderCrypto
import LarderTestSupport
import Synchronization
import Testing

@testable import Larder

/// Resumable uploads continued on another node (ARCHITECTURE §11): two `Larder`s with their
/// own data directories and `UploadStore`s (nothing shared in memory, as two processes) on one
/// PostgreSQL schema and one bucket prefix of the loopback S3 engine.
@Suite(
  .enabled(
    if: !(ProcessInfo.processInfo.environment["LARDER_TEST_CATALOG"] ?? "").isEmpty && LoopbackS3.isAvailable,
    "needs PostgreSQL (LARDER_TEST_CATALOG) and the loopback S3 engine"))
struct SharedUploadTests {
  /// Two nodes of one store; removed with their directories when released.
  final class Cluster {
    let root: URL
    let a: Larder
    let b: Larder
    var uploadsA: UploadStore
    let uploadsB: UploadStore

    init(lease: Duration = .seconds(10), expiry: Duration = .seconds(3600), faultsB: FaultInjector = .none) throws {
      let id = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
      root = FileManager.default.temporaryDirectory.appendingPathComponent("larder-shared-\(id)")
      try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
      let engine = try LoopbackS3.engine()
      let credentials = root.appendingPathComponent("credentials")
      try "aws_access_key_id = \(engine.accessKeyID)\naws_secret_access_key = \(engine.secretAccessKey)\n"
        .write(to: credentials, atomically: true, encoding: .utf8)
      let server = ProcessInfo.processInfo.environment["LARDER_TEST_CATALOG"] ?? ""
      let catalog = CatalogLocation.postgres(server + (server.contains("?") ? "&" : "?") + "schema=su_\(id)")
      let blobs = BlobLocation.s3(url: engine.url + "&prefix=su\(id)", credentialsFile: credentials.path)
      let root = root
      func node(_ name: String, _ faults: FaultInjector) throws -> Larder {
        try TestStore.open(
          at: root.appendingPathComponent(name),
          configuration: .init(faults: faults, backgroundMD5: false, catalog: catalog, blobs: blobs))
      }
      a = try node("a", .none)
      b = try node("b", faultsB)
      uploadsA = UploadStore(larder: a, expiry: expiry, lease: lease)
      uploadsB = UploadStore(larder: b, expiry: expiry, lease: lease)
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    /// What the bucket holds under `uploads/<id>/`, by upload id, once both nodes' background
    /// removals are done.
    func storedUploads() throws -> Set<String> {
      uploadsA.waitForCleanup()
      uploadsB.waitForCleanup()
      var ids: Set<String> = []
      try a.sharedUploads!.forEachStoredUpload { id, _ in ids.insert(id) }
      return ids
    }

    func stagingFileSize(_ node: Larder, _ id: String) -> Int64? {
      POSIX.lstat(node.blobs.uploadsDirectory.appendingPathComponent(id).path).map { Int64($0.st_size) }
    }
  }

  static func content(_ count: Int, seed: UInt64 = 7) -> [UInt8] {
    var x = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    return (0..<count).map { _ in
      x ^= x << 13
      x ^= x >> 7
      x ^= x << 17
      return UInt8(truncatingIfNeeded: x)
    }
  }

  static let mib = 1 << 20

  /// Appends `bytes[range]` at its offset and expects progress.
  @discardableResult
  static func append(_ store: UploadStore, _ id: String, _ bytes: [UInt8], _ range: Range<Int>) throws -> Upload {
    let append = try store.beginAppend(id: id, owner: "u", offset: Int64(range.lowerBound))
    try bytes[range].withUnsafeBytes { try append.write($0) }
    guard case .progress(let upload) = try append.finish() else { throw HarnessFailure("completed early") }
    return upload
  }

  static func finish(_ store: UploadStore, _ id: String, _ bytes: [UInt8], from offset: Int) throws -> StoredObject {
    let append = try store.beginAppend(id: id, owner: "u", offset: Int64(offset))
    try bytes[offset...].withUnsafeBytes { try append.write($0) }
    guard case .complete(let done) = try append.finish() else { throw HarnessFailure("not complete") }
    return try store.publish(done)
  }

  @Test func anUploadBegunOnOneNodeIsFinishedOnAnotherWithoutReReadingIt() throws {
    let cluster = try Cluster()
    let bytes = Self.content(13 * Self.mib)
    let upload = try cluster.uploadsA.create(
      bucket: "app", name: "video.bin", owner: "u", length: Int64(bytes.count))
    // 3 MiB: a piece; 3 more: the staging file reaches 6 MiB, a part; 2 more: a piece.
    try Self.append(cluster.uploadsA, upload.id, bytes, 0..<(3 * Self.mib))
    try Self.append(cluster.uploadsA, upload.id, bytes, (3 * Self.mib)..<(6 * Self.mib))
    let atEight = try Self.append(cluster.uploadsA, upload.id, bytes, (6 * Self.mib)..<(8 * Self.mib))
    #expect(atEight.offset == Int64(8 * Self.mib))
    let state = try cluster.uploadsB.sharedState(of: upload.id)
    #expect(state.parts.map(\.size) == [Int64(6 * Self.mib)])
    #expect(state.pieces.map(\.size) == [Int64(2 * Self.mib)])
    // A's staging file keeps only what the pieces hold.
    #expect(cluster.stagingFileSize(cluster.a, upload.id) == Int64(2 * Self.mib))

    // B has never seen it: HEAD's offset, then the rest.
    #expect(try cluster.uploadsB.upload(id: upload.id, owner: "u").offset == Int64(8 * Self.mib))
    let append = try cluster.uploadsB.beginAppend(id: upload.id, owner: "u", offset: Int64(8 * Self.mib))
    // B rebuilt its staging file from the pieces alone: 2 MiB, not the 8 acknowledged.
    #expect(cluster.stagingFileSize(cluster.b, upload.id) == Int64(2 * Self.mib))
    try bytes[(8 * Self.mib)...].withUnsafeBytes { try append.write($0) }
    guard case .complete(let done) = try append.finish() else { throw HarnessFailure("not complete") }
    #expect(done.sha256Hex == Hex.encode(Digest.hash(.sha256, bytes)))
    let object = try cluster.uploadsB.publish(done)
    #expect(object.file.size == Int64(bytes.count))
    #expect(object.file.sha256 == Hex.encode(Digest.hash(.sha256, bytes)))
    #expect([UInt8](try cluster.a.files.data(of: object.file)) == bytes)
    // Nothing of the upload is left in the bucket, nor in either staging directory.
    #expect(try !cluster.storedUploads().contains(upload.id))
    #expect(cluster.stagingFileSize(cluster.b, upload.id) == nil)
  }

  @Test func aSmallUploadSpreadOverNodesIsPublishedFromTheStagingFile() throws {
    let cluster = try Cluster()
    let bytes = Self.content(300_000, seed: 3)
    let upload = try cluster.uploadsA.create(bucket: "app", name: "s.bin", owner: "u", length: Int64(bytes.count))
    try Self.append(cluster.uploadsA, upload.id, bytes, 0..<100_000)
    try Self.append(cluster.uploadsB, upload.id, bytes, 100_000..<200_000)
    let object = try Self.finish(cluster.uploadsA, upload.id, bytes, from: 200_000)
    #expect([UInt8](try cluster.b.files.data(of: object.file)) == bytes)
    #expect(object.file.contentType == "application/octet-stream")
    #expect(try !cluster.storedUploads().contains(upload.id))
  }

  @Test func aNodeThatDiedHoldingTheLeaseBlocksOthersOnlyUntilItRunsOut() throws {
    let cluster = try Cluster(lease: .seconds(1))
    let bytes = Self.content(2 * Self.mib, seed: 5)
    let upload = try cluster.uploadsA.create(bucket: "app", name: "l.bin", owner: "u", length: Int64(bytes.count))
    // A takes the lease and goes silent mid-append (as a SIGKILLed node: nothing renews it).
    let stalled = try cluster.uploadsA.beginAppend(id: upload.id, owner: "u", offset: 0)
    try bytes[0..<Self.mib].withUnsafeBytes { try stalled.write($0) }
    #expect(throws: UploadError.locked(id: upload.id)) {
      _ = try cluster.uploadsB.beginAppend(id: upload.id, owner: "u", offset: 0)
    }
    Thread.sleep(forTimeInterval: 1.3)
    let object = try Self.finish(cluster.uploadsB, upload.id, bytes, from: 0)
    // A wakes up: its lease is gone, its commit refused; B's object stands.
    #expect(throws: UploadError.locked(id: upload.id)) { _ = try stalled.finish() }
    #expect([UInt8](try cluster.a.files.data(of: object.file)) == bytes)
    #expect(try cluster.uploadsA.upload(id: upload.id, owner: "u").completedAt != nil)
  }

  @Test func aPublishThatFailsAfterAssemblyIsResumedByTheResentChunk() throws {
    final class Once: Sendable {
      let armed = Mutex(true)
      var faults: FaultInjector {
        FaultInjector { [self] point in
          guard point == .beforeCommit, armed.withLock({ a in defer { a = false }; return a }) else { return }
          throw LarderError.invalidArgument("injected failure before the commit")
        }
      }
    }
    let once = Once()
    let cluster = try Cluster(faultsB: once.faults)
    let bytes = Self.content(11 * Self.mib, seed: 9)
    let upload = try cluster.uploadsA.create(bucket: "app", name: "r.bin", owner: "u", length: Int64(bytes.count))
    try Self.append(cluster.uploadsA, upload.id, bytes, 0..<(6 * Self.mib))
    // B assembles the parts, then its commit fails: the client is told to resend.
    #expect(throws: LarderError.self) { _ = try Self.finish(cluster.uploadsB, upload.id, bytes, from: 6 * Self.mib) }
    #expect(try cluster.uploadsA.upload(id: upload.id, owner: "u").offset == Int64(6 * Self.mib))
    #expect(try cluster.uploadsA.sharedState(of: upload.id).assembled)
    // The resend, on A: the upload is reopened from the assembled data, server-side.
    let object = try Self.finish(cluster.uploadsA, upload.id, bytes, from: 6 * Self.mib)
    #expect([UInt8](try cluster.b.files.data(of: object.file)) == bytes)
    #expect(try !cluster.storedUploads().contains(upload.id))
  }

  @Test func partialUploadsFromTwoNodesConcatenate() throws {
    let cluster = try Cluster()
    let first = Self.content(6 * Self.mib + 5, seed: 11)
    let second = Self.content(700_000, seed: 12)
    let p1 = try cluster.uploadsA.create(
      bucket: "app", name: nil, owner: "u", length: Int64(first.count), partial: true)
    let p2 = try cluster.uploadsB.create(
      bucket: "app", name: nil, owner: "u", length: Int64(second.count), partial: true)
    try Self.append(cluster.uploadsA, p1.id, first, 0..<first.count)
    try Self.append(cluster.uploadsB, p2.id, second, 0..<second.count)
    #expect(try cluster.uploadsB.sharedState(of: p1.id).assembled)
    #expect(try !cluster.uploadsB.sharedState(of: p2.id).assembled)
    let done = try cluster.uploadsB.concatenate(
      bucket: "app", name: "joined.bin", owner: "u", metadata: ["name": "joined.bin"], partials: [p1.id, p2.id])
    let object = try cluster.uploadsB.publish(done)
    #expect([UInt8](try cluster.a.files.data(of: object.file)) == first + second)
  }

  @Test func gcRemovesAnExpiredUploadsPartsAndPiecesAndKeysWithoutARow() throws {
    let cluster = try Cluster(expiry: .milliseconds(300))
    let bytes = Self.content(7 * Self.mib, seed: 13)
    let upload = try cluster.uploadsA.create(bucket: "app", name: "e.bin", owner: "u", length: Int64(bytes.count + 1))
    try Self.append(cluster.uploadsA, upload.id, bytes, 0..<(6 * Self.mib))
    try Self.append(cluster.uploadsA, upload.id, bytes, (6 * Self.mib)..<bytes.count)
    // A key of an upload whose row never committed (a node died between storing and committing).
    let orphan = SecureRandom.hexIdentifier(byteCount: 16)
    let scratch = cluster.root.appendingPathComponent("scratch")
    try Data(bytes.prefix(1000)).write(to: scratch)
    try cluster.a.sharedUploads!.putPiece(upload: orphan, name: "piece-0-1000-x", file: scratch.path, offset: 0, length: 1000)
    #expect(try cluster.storedUploads().isSuperset(of: [upload.id, orphan]))
    // Past the expiry, and past the second S3's LastModified is rounded up to.
    Thread.sleep(forTimeInterval: 1.2)
    let report = try GarbageCollector(larder: cluster.b).collect(options: .init(grace: .zero, tempAge: .zero))
    #expect(report.uploadsExpired == 1)
    let left = try cluster.storedUploads()
    #expect(!left.contains(upload.id))
    #expect(!left.contains(orphan))
  }

  @Test func piecesThatVanishedFromTheBucketAreDataLostNotAWrongAnswer() throws {
    let cluster = try Cluster()
    let bytes = Self.content(3 * Self.mib, seed: 17)
    let upload = try cluster.uploadsA.create(bucket: "app", name: "v.bin", owner: "u", length: Int64(bytes.count))
    try Self.append(cluster.uploadsA, upload.id, bytes, 0..<Self.mib)
    let partial = try cluster.uploadsA.create(bucket: "app", name: nil, owner: "u", length: 10, partial: true)
    try Self.append(cluster.uploadsA, partial.id, bytes, 0..<10)
    for id in [upload.id, partial.id] {
      for piece in try cluster.uploadsB.sharedState(of: id).pieces {
        try cluster.a.sharedUploads!.removePiece(upload: id, name: piece.name)
      }
    }
    // B must rebuild from the pieces: they are gone.
    #expect(throws: UploadError.dataLost(id: upload.id)) {
      _ = try cluster.uploadsB.beginAppend(id: upload.id, owner: "u", offset: Int64(Self.mib))
    }
    #expect(throws: UploadError.dataLost(id: partial.id)) {
      _ = try cluster.uploadsB.concatenate(
        bucket: "app", name: "j.bin", owner: "u", metadata: ["name": "j.bin"], partials: [partial.id])
    }
    #expect(try cluster.a.objects.find(bucket: "app", name: "j.bin") == nil)
  }

  @Test func anotherNodesConcatenationIsSeenRunningUntilItsLeaseRunsOut() throws {
    let cluster = try Cluster(lease: .seconds(1))
    let bytes = Self.content(10, seed: 19)
    let partial = try cluster.uploadsA.create(bucket: "app", name: nil, owner: "u", length: 10, partial: true)
    try Self.append(cluster.uploadsA, partial.id, bytes, 0..<10)
    let prepared = try cluster.uploadsA.prepareConcatenation(
      bucket: "app", name: "c.bin", owner: "u", metadata: ["name": "c.bin"], partials: [partial.id])
    // Running on A: B's tus HEAD must not call it interrupted.
    #expect(cluster.uploadsB.isConcatenating(prepared.upload.id))
    #expect(cluster.uploadsA.isConcatenating(prepared.upload.id))
    Thread.sleep(forTimeInterval: 1.2)
    // As if A had died: its lease ran out, B now sees an interrupted concatenation.
    #expect(!cluster.uploadsB.isConcatenating(prepared.upload.id))
    let object = try cluster.uploadsA.publish(try cluster.uploadsA.copy(prepared))
    #expect([UInt8](try cluster.b.files.data(of: object.file)) == bytes)
    #expect(!cluster.uploadsB.isConcatenating(prepared.upload.id))
  }

  @Test func stagingFilesAreSweptOnceNoSessionHoldsThem() throws {
    let cluster = try Cluster()
    let bytes = Self.content(2 * Self.mib, seed: 23)
    let upload = try cluster.uploadsA.create(bucket: "app", name: "w.bin", owner: "u", length: Int64(bytes.count))
    try Self.append(cluster.uploadsA, upload.id, bytes, 0..<Self.mib)
    _ = try Self.finish(cluster.uploadsB, upload.id, bytes, from: Self.mib)
    // A still caches its session of an upload B finished: its staging file stays meanwhile.
    #expect(cluster.stagingFileSize(cluster.a, upload.id) == Int64(Self.mib))
    // Another store on A's directory (another process) sweeps at start: the session's lock keeps it.
    _ = UploadStore(larder: cluster.a)
    #expect(cluster.stagingFileSize(cluster.a, upload.id) == Int64(Self.mib))
    // The session is gone (A restarted, or it was evicted): the next sweep removes the file.
    cluster.uploadsA = UploadStore(larder: cluster.a)
    cluster.uploadsA.sweepStagingFiles()
    #expect(cluster.stagingFileSize(cluster.a, upload.id) == nil)
  }

  @Test func aLongAppendKeepsItsLeaseBeyondTheLeaseTime() throws {
    let cluster = try Cluster(lease: .seconds(1))
    let bytes = Self.content(8 * 65_536, seed: 29)
    let upload = try cluster.uploadsA.create(bucket: "app", name: "slow.bin", owner: "u", length: Int64(bytes.count))
    let slow = try cluster.uploadsA.beginAppend(id: upload.id, owner: "u", offset: 0)
    // A slow client: a chunk every 0.25 s for 2 s, twice the lease. Each write past a third of
    // the lease renews it, so B never gets in.
    for chunk in 0..<8 {
      try bytes[(chunk * 65_536)..<((chunk + 1) * 65_536)].withUnsafeBytes { try slow.write($0) }
      if chunk == 5 {
        #expect(throws: UploadError.locked(id: upload.id)) {
          _ = try cluster.uploadsB.beginAppend(id: upload.id, owner: "u", offset: 0)
        }
      }
      Thread.sleep(forTimeInterval: 0.25)
    }
    guard case .complete(let done) = try slow.finish() else { throw HarnessFailure("not complete") }
    let object = try cluster.uploadsA.publish(done)
    #expect([UInt8](try cluster.b.files.data(of: object.file)) == bytes)
  }

  @Test(arguments: ["not json", #"{"parts":"many"}"#, 
    // Consistent sizes, but a SHA-256 state that is not base64.
    #"{"parts":[],"pieces":[{"name":"p","size":50000}],"sha256":"!!","assembled":false,"data":"data"}"#,
    // A well-formed SHA-256 state, but of 64 bytes where 50,000 were acknowledged.
    #"{"parts":[],"pieces":[{"name":"p","size":50000}],"sha256":"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACAAAAAAAA","assembled":false,"data":"data"}"#,
    // Pieces that do not add up to the offset.
    #"{"parts":[],"pieces":[],"sha256":null,"assembled":false,"data":"data"}"#,
  ])
  func anUnreadableRowStateIsDataLostNotAGuess(_ state: String) throws {
    let cluster = try Cluster()
    let bytes = Self.content(100_000, seed: 31)
    let upload = try cluster.uploadsA.create(bucket: "app", name: "x.bin", owner: "u", length: Int64(bytes.count))
    try Self.append(cluster.uploadsA, upload.id, bytes, 0..<50_000)
    try cluster.a.catalog.write { db in
      try db.execute("UPDATE uploads SET shared_state = ? WHERE id = ?", [state, upload.id])
    }
    // B has no session to trust: it must rebuild from the row, which it cannot read.
    #expect(throws: UploadError.dataLost(id: upload.id)) {
      _ = try cluster.uploadsB.beginAppend(id: upload.id, owner: "u", offset: 50_000)
    }
    // Nothing is left held: the lease went back with the refusal.
    #expect(try cluster.a.catalog.read { try $0.row("SELECT lease_holder FROM uploads WHERE id = ?", [upload.id]) }?
      .string("lease_holder") == nil)
  }
}
