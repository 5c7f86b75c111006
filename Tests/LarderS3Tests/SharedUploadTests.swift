import Foundation
import LarderCrypto
import LarderTestSupport
import Synchronization
import Testing

@testable import Larder

/// Resumable uploads continued on another node (ARCHITECTURE.md, "Resumable uploads across nodes"):
/// two `Larder`s with their own data directories and `UploadStore`s (nothing shared in memory, as
/// two processes) on one PostgreSQL schema and one bucket prefix of the loopback S3 engine.
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

    init(
      lease: Duration = .seconds(10), expiry: Duration = .seconds(3600), faultsB: FaultInjector = .none,
      hooksA: (Larder) -> NodeHooks = { _ in .init() },
      hooksB: (Larder) -> NodeHooks = { _ in .init() }
    ) throws {
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
      uploadsA = hooksA(a).uploads(larder: a, expiry: expiry, lease: lease)
      uploadsB = hooksB(b).uploads(larder: b, expiry: expiry, lease: lease)
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

  /// Proves: a lease runs out (B gets in once it did), and every commit requires the lease
  /// of the append making it (`lease_holder` and `lease_epoch`), not only the offset it began at.
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
    // B takes over and has committed nothing yet when A wakes up: the offset is still the one A
    // started from, so only the lease (its holder and epoch) refuses A's commit.
    let taking = try cluster.uploadsB.beginAppend(id: upload.id, owner: "u", offset: 0)
    #expect(throws: UploadError.locked(id: upload.id)) { _ = try stalled.finish() }
    try bytes.withUnsafeBytes { try taking.write($0) }
    guard case .complete(let done) = try taking.finish() else { throw HarnessFailure("not complete") }
    let object = try cluster.uploadsB.publish(done)
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
  // MARK: - leases on the catalog's clock, fencing, the assembly's check (issue 23)

  /// An upload of `bytes` created on A, and an append on A holding its lease with the first
  /// half written (nothing committed yet).
  static func halfWrittenOnA(_ cluster: Cluster, _ name: String, _ bytes: [UInt8]) throws -> (
    Upload, UploadAppend
  ) {
    let upload = try cluster.uploadsA.create(
      bucket: "app", name: name, owner: "u", length: Int64(bytes.count))
    let append = try cluster.uploadsA.beginAppend(id: upload.id, owner: "u", offset: 0)
    try bytes[0..<(bytes.count / 2)].withUnsafeBytes { try append.write($0) }
    return (upload, append)
  }

  /// Proves: leases are claimed and judged on the catalog's clock. B's clock runs 10 minutes
  /// ahead, so by B's clock A's lease ran out long ago; B must still be refused while it runs.
  @Test func aNodeWhoseClockRunsAheadCannotTakeALiveLease() throws {
    let cluster = try Cluster(hooksB: { _ in NodeHooks(clockSkew: .seconds(600)) })
    let bytes = Self.content(200_000, seed: 37)
    let (upload, holding) = try Self.halfWrittenOnA(cluster, "skew.bin", bytes)
    #expect(throws: UploadError.locked(id: upload.id)) {
      _ = try cluster.uploadsB.beginAppend(id: upload.id, owner: "u", offset: 0)
    }
    #expect(cluster.uploadsB.isConcatenating(upload.id))
    guard case .progress(let upload) = try holding.finish() else { throw HarnessFailure("completed early") }
    // Given back, B (still 10 minutes ahead) takes it at once and finishes.
    let object = try Self.finish(cluster.uploadsB, upload.id, bytes, from: Int(upload.offset))
    #expect([UInt8](try cluster.a.files.data(of: object.file)) == bytes)
  }

  /// Proves: the lease is renewed on a timer while a part is being sent. A's part takes 2.5
  /// lease times to reach the store; B is refused meanwhile and A's commit goes through.
  /// (A 3 s lease, renewed every second: with 1 s, a loaded machine running the whole S3 pass
  /// once delayed the renewals past the lease and B took it.)
  @Test func aPartSlowerThanTheLeaseKeepsIt() throws {
    let cluster = try Cluster(
      lease: .seconds(3),
      hooksA: { StallingStorage($0.sharedUploads!).hooks { _ in Thread.sleep(forTimeInterval: 7.5) } })
    let bytes = Self.content(7 * Self.mib, seed: 41)
    let upload = try cluster.uploadsA.create(
      bucket: "app", name: "slowpart.bin", owner: "u", length: Int64(bytes.count))
    let result = Mutex<Result<Upload, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    let uploads = cluster.uploadsA
    Thread.detachNewThread {
      result.withLock { $0 = Result { try Self.append(uploads, upload.id, bytes, 0..<(6 * Self.mib)) } }
      done.signal()
    }
    Thread.sleep(forTimeInterval: 5.4)
    #expect(throws: UploadError.locked(id: upload.id)) {
      _ = try cluster.uploadsB.beginAppend(id: upload.id, owner: "u", offset: 0)
    }
    done.wait()
    #expect(try result.withLock { try $0!.get() }.offset == Int64(6 * Self.mib))
    let object = try Self.finish(cluster.uploadsB, upload.id, bytes, from: 6 * Self.mib)
    #expect([UInt8](try cluster.a.files.data(of: object.file)) == bytes)
  }

  /// Proves: part numbers are spaced by the lease epoch, which every takeover moves. A is
  /// stopped (its part held back, its renewals too, as SIGSTOP would) past its lease while
  /// sending part 2; B takes over and records its own next part; A resumes and its late part
  /// lands. With part numbers `count + 1` A's part replaced B's and the upload could never
  /// complete; here it completes with the source's bytes.
  @Test func aNodeStoppedMidPartPastItsLeaseCannotReplaceTheNextHoldersPart() throws {
    let stopped = Gate()
    let cluster = try Cluster(
      lease: .seconds(1),
      hooksA: { larder in
        var hooks = StallingStorage(larder.sharedUploads!).hooks { number in if number > 1 { stopped.pass() }
        }
        hooks.beforeRenewal = { stopped.pass() }
        return hooks
      })
    let bytes = Self.content(15 * Self.mib, seed: 43)
    let upload = try cluster.uploadsA.create(
      bucket: "app", name: "fenced.bin", owner: "u", length: Int64(bytes.count))
    try Self.append(cluster.uploadsA, upload.id, bytes, 0..<(6 * Self.mib))
    stopped.close()
    let late = Mutex<Result<Upload, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    let uploads = cluster.uploadsA
    Thread.detachNewThread {
      late.withLock {
        $0 = Result { try Self.append(uploads, upload.id, bytes, (6 * Self.mib)..<(12 * Self.mib)) }
      }
      done.signal()
    }
    Thread.sleep(forTimeInterval: 1.5)
    // B takes over past A's lease: 7 MiB, one part of other bounds than A's.
    try Self.append(cluster.uploadsB, upload.id, bytes, (6 * Self.mib)..<(13 * Self.mib))
    // A resumes: its part reaches the store, its commit is refused.
    stopped.open()
    done.wait()
    #expect(throws: UploadError.locked(id: upload.id)) { _ = try late.withLock { try $0!.get() } }
    let object = try Self.finish(cluster.uploadsB, upload.id, bytes, from: 13 * Self.mib)
    #expect(object.file.sha256 == Hex.encode(Digest.hash(.sha256, bytes)))
    #expect([UInt8](try cluster.a.files.data(of: object.file)) == bytes)
  }

  /// Proves: a release after a store call failed midway moves the epoch. A's part 2 "times out"
  /// (the store got it, A was told it failed) and A gives its lease back; B continues with a part
  /// of other bounds; then the store applies A's request again. With the epoch unmoved B would
  /// have numbered its part 2 too, and the late request replaced it.
  @Test func aPartThatLandsAfterItsSenderGaveUpCannotReplaceTheNextHoldersPart() throws {
    let late = LateRequest()
    let cluster = try Cluster(hooksA: { StallingStorage($0.sharedUploads!, late: late).hooks() })
    let bytes = Self.content(15 * Self.mib, seed: 61)
    let upload = try cluster.uploadsA.create(
      bucket: "app", name: "late.bin", owner: "u", length: Int64(bytes.count))
    try Self.append(cluster.uploadsA, upload.id, bytes, 0..<(6 * Self.mib))
    #expect(throws: LarderError.self) {
      try Self.append(cluster.uploadsA, upload.id, bytes, (6 * Self.mib)..<(12 * Self.mib))
    }
    try Self.append(cluster.uploadsB, upload.id, bytes, (6 * Self.mib)..<(13 * Self.mib))
    try late.land()
    let object = try Self.finish(cluster.uploadsB, upload.id, bytes, from: 13 * Self.mib)
    #expect(object.file.sha256 == Hex.encode(Digest.hash(.sha256, bytes)))
  }

  /// Proves: the assembled object is checked against the MD5s of the parts as this node read
  /// them (S3's multipart ETag). The store here keeps other bytes than A read for part 1 (one
  /// byte flipped on the way, which the store accepts as sent); the upload is refused as an
  /// assembly mismatch and deleted, never published under the SHA-256 of the bytes received.
  @Test func anAssemblyOfOtherBytesThanWereSentIsNeverPublished() throws {
    let cluster = try Cluster(hooksA: { StallingStorage($0.sharedUploads!, flipsAByte: true).hooks() })
    let bytes = Self.content(7 * Self.mib, seed: 47)
    let upload = try cluster.uploadsA.create(
      bucket: "app", name: "flipped.bin", owner: "u", length: Int64(bytes.count))
    try Self.append(cluster.uploadsA, upload.id, bytes, 0..<(6 * Self.mib))
    #expect(throws: UploadError.assemblyMismatch(id: upload.id)) {
      _ = try Self.finish(cluster.uploadsA, upload.id, bytes, from: 6 * Self.mib)
    }
    let published = try cluster.a.objects.find(bucket: "app", name: "flipped.bin")
    #expect(published == nil)
    // What publishing it would have meant: other bytes under the SHA-256 of those received.
    if let published { #expect([UInt8](try cluster.a.files.data(of: published.file)) == bytes) }
    #expect(throws: UploadError.notFound(id: upload.id)) {
      _ = try cluster.uploadsB.upload(id: upload.id, owner: "u")
    }
    #expect(try !cluster.storedUploads().contains(upload.id))
  }

  /// Proves: `terminate` checks the catalog lease, not only this process's: B cannot delete
  /// an upload A is appending to.
  @Test func anotherNodeCannotTerminateAnUploadWhileAnAppendHoldsIt() throws {
    let cluster = try Cluster()
    let bytes = Self.content(100_000, seed: 53)
    let (upload, holding) = try Self.halfWrittenOnA(cluster, "t.bin", bytes)
    #expect(throws: UploadError.locked(id: upload.id)) {
      try cluster.uploadsB.terminate(id: upload.id, owner: "u")
    }
    guard case .progress = try holding.finish() else { throw HarnessFailure("completed early") }
    try cluster.uploadsB.terminate(id: upload.id, owner: "u")
    #expect(throws: UploadError.notFound(id: upload.id)) {
      _ = try cluster.uploadsA.upload(id: upload.id, owner: "u")
    }
  }

  /// Proves: an upload whose row says `assembled` but whose completion never happened (its
  /// node died in between) has its multipart upload aborted when it is collected.
  @Test func anAssemblyThatNeverHappenedIsAbortedWhenCollected() throws {
    let cluster = try Cluster(expiry: .milliseconds(300))
    let bytes = Self.content(6 * Self.mib, seed: 59)
    let upload = try cluster.uploadsA.create(
      bucket: "app", name: "n.bin", owner: "u", length: Int64(bytes.count + 1))
    try Self.append(cluster.uploadsA, upload.id, bytes, 0..<bytes.count)
    var state = try cluster.uploadsA.sharedState(of: upload.id)
    let multipart = try #require(state.multipart)
    state.assembled = true
    try cluster.a.catalog.write { db in
      try db.execute("UPDATE uploads SET shared_state = ? WHERE id = ?", [state.json, upload.id])
    }
    Thread.sleep(forTimeInterval: 1.2)
    let report = try GarbageCollector(larder: cluster.b).collect(options: .init(grace: .zero, tempAge: .zero))
    #expect(report.uploadsExpired == 1)
    // The multipart upload is gone: a part sent to it is refused (404 NoSuchUpload).
    let scratch = cluster.root.appendingPathComponent("scratch")
    try Data(bytes.prefix(1000)).write(to: scratch)
    #expect(throws: LarderError.self) {
      _ = try cluster.a.sharedUploads!.sendPart(
        upload: upload.id, data: state.data, multipart: multipart, number: 9, file: scratch.path, offset: 0,
        length: 1000)
    }
  }
}

/// Opens and closes on cue; threads that `pass()` while it is closed wait for it to open.
final class Gate: Sendable {
  private let isOpen = Mutex(true)
  private let opened = DispatchSemaphore(value: 0)
  private let waiting = Mutex(0)

  func close() { isOpen.withLock { $0 = false } }

  func open() {
    let count = isOpen.withLock { open in
      open = true
      return waiting.withLock { waiters in
        defer { waiters = 0 }
        return waiters
      }
    }
    for _ in 0..<count { opened.signal() }
  }

  func pass() {
    let wait = isOpen.withLock { open in
      if !open { waiting.withLock { $0 += 1 } }
      return !open
    }
    if wait { opened.wait() }
  }
}

/// A request the store applies again after its sender gave up on it (a retried part landing late).
final class LateRequest: Sendable {
  let pending = Mutex<(@Sendable () throws -> Void)?>(nil)
  func land() throws { try pending.withLock { $0 }?() }
}

/// The S3 backend's shared storage with a test's misbehaviour: a hook before each part is
/// sent (a slow network, a stopped process), or a byte flipped in the bytes that reach the
/// store while the part reports the MD5 of what was read (a store that keeps other bytes).
final class StallingStorage: SharedUploadStorage, Sendable {
  let inner: any SharedUploadStorage
  let beforePart: @Sendable (_ number: Int) -> Void
  let flipsAByte: Bool
  /// When set, part 2 is sent and then reported failed, as a request that timed out on the
  /// client's side; the store applies it again when the test says (``LateRequest/land()``).
  let late: LateRequest?

  init(
    _ inner: any SharedUploadStorage, flipsAByte: Bool = false, late: LateRequest? = nil,
    beforePart: @escaping @Sendable (_ number: Int) -> Void = { _ in }
  ) {
    self.inner = inner
    self.flipsAByte = flipsAByte
    self.late = late
    self.beforePart = beforePart
  }

  /// Hooks that make a store use this storage, with `beforePart` before each part.
  func hooks(beforePart: @escaping @Sendable (_ number: Int) -> Void = { _ in }) -> NodeHooks {
    NodeHooks(
      storage: StallingStorage(inner, flipsAByte: flipsAByte, late: late, beforePart: beforePart))
  }

  var minimumPartSize: Int64 { inner.minimumPartSize }
  func startParts(upload id: String, data: String) throws -> String {
    try inner.startParts(upload: id, data: data)
  }
  func sendPart(
    upload id: String, data: String, multipart: String, number: Int, file: String, offset: Int64,
    length: Int64
  ) throws -> SharedUploadState.Part {
    beforePart(number)
    if let late, number == 2 {
      // The bytes as sent, kept aside: the staging file is cut back once the append fails.
      let kept = file + ".late"
      let bytes = try Data(contentsOf: URL(fileURLWithPath: file)).dropFirst(Int(offset)).prefix(Int(length))
      try bytes.write(to: URL(fileURLWithPath: kept))
      let inner = inner
      let send: @Sendable () throws -> Void = {
        _ = try inner.sendPart(
          upload: id, data: data, multipart: multipart, number: number, file: kept, offset: 0, length: length)
      }
      try send()
      late.pending.withLock { $0 = send }
      throw LarderError.blobStoreUnavailable("UploadPart timed out (the store applied it)")
    }
    guard flipsAByte else {
      return try inner.sendPart(
        upload: id, data: data, multipart: multipart, number: number, file: file, offset: offset,
        length: length)
    }
    var bytes = [UInt8](
      try Data(contentsOf: URL(fileURLWithPath: file)).dropFirst(Int(offset)).prefix(Int(length)))
    let read = Hex.encode(Digest.hash(.md5, bytes))
    bytes[bytes.count / 2] ^= 0xff
    let flipped = file + ".flipped"
    try Data(bytes).write(to: URL(fileURLWithPath: flipped))
    defer { unlink(flipped) }
    var part = try inner.sendPart(
      upload: id, data: data, multipart: multipart, number: number, file: flipped, offset: 0, length: length)
    part.md5 = read
    return part
  }
  func copyPart(
    upload id: String, data: String, multipart: String, number: Int, from source: String, range: Range<Int64>
  ) throws -> SharedUploadState.Part {
    try inner.copyPart(
      upload: id, data: data, multipart: multipart, number: number, from: source, range: range)
  }
  func putPiece(upload id: String, name: String, file: String, offset: Int64, length: Int64) throws {
    try inner.putPiece(upload: id, name: name, file: file, offset: offset, length: length)
  }
  func removePiece(upload id: String, name: String) throws { try inner.removePiece(upload: id, name: name) }
  func readPiece(upload id: String, name: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    try inner.readPiece(upload: id, name: name, body)
  }
  func assemble(upload id: String, data: String, multipart: String, parts: [SharedUploadState.Part]) throws
    -> String
  {
    try inner.assemble(upload: id, data: data, multipart: multipart, parts: parts)
  }
  func assembledSize(upload id: String, data: String) throws -> Int64? {
    try inner.assembledSize(upload: id, data: data)
  }
  func readData(
    upload id: String, data: String, range: Range<Int64>?, _ body: (UnsafeRawBufferPointer) throws -> Void
  )
    throws
  { try inner.readData(upload: id, data: data, range: range, body) }
  func removeUpload(_ id: String, data: String, multipart: String?) throws {
    try inner.removeUpload(id, data: data, multipart: multipart)
  }
  func forEachStoredUpload(_ body: (_ id: String, _ newest: Date) throws -> Void) throws {
    try inner.forEachStoredUpload(body)
  }
}

/// What a test changes about one node's upload store to make it misbehave on cue, handed to
/// the store's `init` (production passes none of it).
struct NodeHooks {
  /// Added to the node's clock: a node whose clock is wrong.
  var clockSkew: Duration = .zero
  /// Stands in for the node's shared storage (a store that stalls or misbehaves on cue).
  var storage: (any SharedUploadStorage)?
  /// Called on the renewal timer's thread before each renewal: blocking stops renewals.
  var beforeRenewal: (@Sendable () -> Void)?

  func uploads(larder: Larder, expiry: Duration, lease: Duration) -> UploadStore {
    let skew = clockSkew
    return UploadStore(
      larder: larder, expiry: expiry, lease: lease, clock: { Date() + skew.timeInterval }, storage: storage,
      beforeRenewal: beforeRenewal)
  }
}

extension UploadStore {
  /// The shared state the upload's row records now.
  func sharedState(of id: String) throws -> SharedUploadState {
    let row = try #require(try table.row(id))
    return try #require(SharedUploadState(json: row.upload.dataState.stored))
  }
}
