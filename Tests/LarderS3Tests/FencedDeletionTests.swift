import Foundation
import LarderCrypto
import LarderTestSupport
import Synchronization
import Testing

@testable import Larder
@testable import LarderS3Store
import LarderPostgres

/// Fenced deletion (ARCHITECTURE.md) when the collector's locks and sessions are lost, on the
/// real PostgreSQL and S3 engines: what was measured to lose acknowledged uploads before (27 of
/// 400) loses none. Each test names the mechanism it proves; each fails with that mechanism
/// removed (a writer that reuses the address it read, as the epoch protocol did, instead of
/// uploading to a fresh fence).
@Suite(
  .enabled(
    if: LoopbackS3.isAvailable && TestCatalog.isPostgres, "needs the loopback S3 engine and PostgreSQL"))
struct FencedDeletionTests {
  typealias Race = BlobDeletionRaceTests

  /// Runs its body at every hit of `point`; `once` disarms it after the first.
  final class Hook: Sendable {
    private let body = Mutex<(@Sendable () throws -> Void)?>(nil)
    let point: FaultPoint
    init(at point: FaultPoint) { self.point = point }
    func arm(_ run: @escaping @Sendable () throws -> Void) { body.withLock { $0 = run } }
    var faults: FaultInjector {
      FaultInjector { [self] hit in
        guard hit == point,
          let run = body.withLock({ b in
            defer { b = nil }
            return b
          })
        else { return }
        try run()
      }
    }
  }

  /// A connection of the test's own, to find and end the collector's sessions.
  static func admin(_ larder: Larder) throws -> any Database { try larder.catalog.dedicatedConnection() }

  /// What identifies the sessions a collection of `larder` uses: its writer connection's pid
  /// (asked of that connection itself) and the key of its collector lock (`LRDG`).
  static func sessions(of larder: Larder) throws -> (writer: Int64, lockKey: Int64) {
    let pid = try larder.catalog.write { db in try db.row("SELECT pg_backend_pid() AS pid")?.int("pid") ?? 0 }
    let key = try #require(try larder.catalog.dedicatedConnection() as? PostgresDatabase).collectorLockKey
    return (pid, key)
  }

  /// Ends the collector's writer session and its lock session, as a restart, a failover or an
  /// idle-in-transaction timeout would: PostgreSQL releases the collector lock with it.
  static func terminate(writer pid: Int64, lockKey: Int64, on admin: any Database) throws -> Int {
    let key = UInt64(bitPattern: lockKey)
    let lockHolders = try admin.rows(
      "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND classid = ?::oid AND objid = ?::oid",
      [Int64(key >> 32), Int64(key & 0xFFFF_FFFF)]
    ).compactMap { $0.int("pid") }
    var ended = 0
    for target in Set([pid] + lockHolders) {
      if try admin.row("SELECT pg_terminate_backend(?::int)::int AS ok", [target])?.int("ok") == 1 {
        ended += 1
      }
    }
    return ended
  }

  /// `count` distinct contents of `size` bytes, unique to this run (the bucket is shared).
  static func contents(_ count: Int, size: Int = 2048) -> [[UInt8]] {
    let salt = Array(UUID().uuidString.utf8)
    return (0..<count).map { i in
      var bytes = salt + Array("#\(i)#".utf8)
      bytes += (0..<(size - bytes.count)).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ i) }
      return bytes
    }
  }

  /// Uploads `contents` as objects `name-<i>` on `workers` threads at once; returns what failed.
  static func upload(_ contents: [(Int, [UInt8])], to larder: Larder, workers: Int = 4) -> [String] {
    let failures = Mutex<[String]>([])
    let items = contents
    DispatchQueue.concurrentPerform(iterations: workers) { worker in
      for (i, bytes) in items.enumerated().filter({ $0.offset % workers == worker }).map({ $0.element }) {
        do {
          _ = try larder.objects.put(bucket: "app", name: "again-\(i)", data: Data(bytes))
        } catch {
          failures.withLock { $0.append("\(i): \(error)") }
        }
      }
    }
    return failures.withLock { $0 }
  }

  /// Every acknowledged object reads back byte for byte (its failures), and verify's findings.
  static func check(_ contents: [(Int, [UInt8])], in larder: Larder) throws -> (
    lost: [String], findings: [String]
  ) {
    var lost: [String] = []
    for (i, bytes) in contents {
      do {
        let object = try larder.objects.get(bucket: "app", name: "again-\(i)")
        if try larder.files.data(of: object.file) != Data(bytes) { lost.append("\(i): wrong bytes") }
      } catch {
        lost.append("\(i): \(error)")
      }
    }
    let verify = try Verifier(larder: larder, deep: true).verify()
    return (lost, verify.findings.map { "\($0.kind) \($0.sha256 ?? "")" })
  }

  /// (a) Proves that deletion is safe without the collector's session or lock: its PostgreSQL
  /// backends (writer and collector lock) are terminated in the middle of a deletion phase,
  /// and writers re-upload the same 200 contents, in reverse order so they meet the ones not
  /// deleted yet, before the rest of the collector's DELETEs go out. Every re-upload took a
  /// fresh fence, so none of those DELETEs touches it: 0 lost, verify clean. (The epoch
  /// protocol lost 27 of 400 this way; a writer reusing the address it found loses ~100 here.)
  @Test func theCollectorsSessionKilledMidDeletionLosesNoAcknowledgedUpload() throws {
    let (directory, prefix) = Race.fresh()
    defer { try? FileManager.default.removeItem(at: directory) }
    let hook = Hook(at: .gcMidBatch)
    let collector = try Race.store(at: directory, prefix: prefix, faults: hook.faults)
    let writer = try Race.store(at: directory, prefix: prefix)
    let contents = Self.contents(200)
    for bytes in contents { _ = try writer.files.put(Data(bytes)) }
    Thread.sleep(forTimeInterval: 0.01)
    let (pid, lockKey) = try Self.sessions(of: collector)
    let ended = Mutex(0)
    let failures = Mutex<[String]>([])
    let reversed = Array(contents.enumerated().map { ($0.offset, $0.element) }.reversed())
    hook.arm {
      // Halfway through the DELETEs of the one batch (its intents committed): the sessions go.
      let n = try Self.terminate(writer: pid, lockKey: lockKey, on: try Self.admin(writer))
      ended.withLock { $0 = n }
      failures.withLock { $0 = Self.upload(reversed, to: writer) }
    }
    // The collector's DELETEs need no session; removing its intents afterwards reconnects.
    let report = try GarbageCollector(larder: collector).collect(options: Race.now)
    #expect(ended.withLock { $0 } == 2)
    #expect(failures.withLock { $0 } == [])
    #expect(report.blobsRemoved == 200)
    let (lost, findings) = try Self.check(reversed, in: writer)
    #expect(lost == [], "\(lost.count) of 200 acknowledged uploads lost")
    #expect(findings == [])
    // Nothing left to resume; a later collection keeps every referenced blob.
    let again = try GarbageCollector(larder: writer).collect(options: Race.now)
    #expect(again.deletionsResumed == 0)
    #expect(again.blobsRemoved == 0)
    #expect(try Self.check(reversed, in: writer).lost == [])
  }

  /// (b) Proves that a late DELETE is harmless: the collector's DELETE of an address is held
  /// back (past any client timeout) until the same content was uploaded again and committed,
  /// then applied, and applied once more later still (a retried request the store executes
  /// twice). It targets the old fence's key, which no row names again: the content reads back.
  @Test func aDeleteAppliedLateRemovesNothingAnyoneReliesOn() throws {
    let (directory, prefix) = Race.fresh()
    defer { try? FileManager.default.removeItem(at: directory) }
    let hook = Hook(at: .gcAfterTrash)
    let larder = try Race.store(at: directory, prefix: prefix, faults: hook.faults)
    let bytes = Self.contents(1, size: 70_000)[0]
    _ = try larder.files.put(Data(bytes))
    let old = try #require(try Race.address(of: bytes, in: larder))
    Thread.sleep(forTimeInterval: 0.01)
    let object = Mutex<StoredObject?>(nil)
    hook.arm {
      // Phase A committed (row gone, intent recorded); its DELETE has not gone out yet.
      #expect(try Race.address(of: bytes, in: larder) == nil)
      let put = try larder.objects.put(bucket: "app", name: "late.bin", data: Data(bytes))
      object.withLock { $0 = put }
    }
    let report = try GarbageCollector(larder: larder).collect(options: Race.now)
    #expect(report.blobsRemoved == 1)
    let fresh = try #require(try Race.address(of: bytes, in: larder))
    #expect(fresh.fence > old.fence)
    // The delayed DELETE arrives again, long after.
    try #require(larder.content as? S3ContentStore).remove(old)
    let stored = try #require(object.withLock { $0 })
    #expect(try larder.files.data(of: stored.file) == Data(bytes))
    #expect(try larder.content.inspect(fresh)?.size == Int64(bytes.count))
    #expect(try Verifier(larder: larder, deep: true).verify().findings.map(\.kind) == [])
  }

  /// (b, through the network) Proves the same for a DELETE the client saw fail: a proxy in
  /// front of the store keeps the collector's DELETE back and cuts its connection, so the
  /// collector retries, gives up and leaves its intent; the content is uploaded again (a fresh
  /// fence), and only then does the store get the kept DELETE, exactly as signed, and apply it.
  /// It removes the old fence's object, which no row names: the content reads back, and the
  /// next collection finishes the intent.
  @Test func aDeleteTheClientGaveUpOnAndTheStoreAppliesLaterRemovesNothingAnyoneReliesOn() throws {
    let (directory, prefix) = Race.fresh()
    defer { try? FileManager.default.removeItem(at: directory) }
    let engine = try LoopbackS3.engine()
    let endpoint = try #require(engine.url.firstRange(of: "endpoint=http://127.0.0.1:"))
    let upstream = try #require(UInt16(engine.url[endpoint.upperBound...].prefix(while: \.isNumber)))
    let proxy = try DeleteHoldingProxy(upstreamPort: upstream)
    defer { proxy.stop() }
    let writer = try Race.store(at: directory, prefix: prefix)
    // The collector reaches the store only through the proxy.
    let credentials = directory.deletingLastPathComponent().appendingPathComponent("\(prefix).credentials")
    let throughProxy = engine.url.replacingOccurrences(
      of: "127.0.0.1:\(upstream)", with: "127.0.0.1:\(proxy.port)")
    let collector = try TestStore.open(
      at: directory,
      configuration: .init(
        backgroundMD5: false,
        blobs: .s3(url: throughProxy + "&prefix=\(prefix)", credentialsFile: credentials.path)))
    let bytes = Self.contents(1, size: 70_000)[0]
    _ = try writer.files.put(Data(bytes))
    let old = try #require(try Race.address(of: bytes, in: writer))
    Thread.sleep(forTimeInterval: 0.01)
    proxy.holding = true
    #expect(throws: LarderError.self) { try GarbageCollector(larder: collector).collect(options: Race.now) }
    proxy.holding = false
    // The row and its intent are committed; the object is still there, its DELETEs kept back.
    #expect(proxy.heldCount >= 1)
    #expect(try Race.address(of: bytes, in: writer) == nil)
    #expect(try Race.count("blob_deletions", in: writer) == 1)
    #expect(try writer.content.inspect(old)?.size == Int64(bytes.count))
    let object = try writer.objects.put(bucket: "app", name: "late.bin", data: Data(bytes))
    let fresh = try #require(try Race.address(of: bytes, in: writer))
    #expect(fresh != old)
    // Now the store applies the DELETEs it never answered.
    #expect(Set(try proxy.release()) == [204])
    #expect(try writer.content.inspect(old)?.size == nil)
    #expect(try writer.files.data(of: object.file) == Data(bytes))
    let report = try GarbageCollector(larder: writer).collect(options: Race.now)
    #expect(report.deletionsResumed == 1)
    #expect(report.blobsRemoved == 0)
    #expect(try writer.files.data(of: object.file) == Data(bytes))
    #expect(try Verifier(larder: writer, deep: true).verify().findings.map(\.kind) == [])
  }

  /// (c) Proves that two collectors on one catalog, in two data directories, may both run (the
  /// first one's lock session was ended, so the second got the lock) without losing a
  /// referenced blob or counting one twice: each row is counted by the one DELETE that removed
  /// it, and the intents the second finishes for the first are reported as resumed, not removed.
  @Test func twoCollectorsAtOnceLoseNothingAndCountEachBlobOnce() throws {
    let (first, prefix) = Race.fresh()
    let second = first.deletingLastPathComponent().appendingPathComponent(first.lastPathComponent + "-b")
    defer {
      try? FileManager.default.removeItem(at: first)
      try? FileManager.default.removeItem(at: second)
    }
    let hook = Hook(at: .gcMidBatch)
    let a = try Race.store(at: first, prefix: prefix, faults: hook.faults)
    // The second data directory on the first one's catalog schema and bucket prefix.
    let engine = try LoopbackS3.engine()
    let credentials = first.deletingLastPathComponent().appendingPathComponent("\(prefix).credentials")
    let b = try TestStore.open(
      at: second,
      configuration: .init(
        backgroundMD5: false, catalog: a.catalogLocation,
        blobs: .s3(url: engine.url + "&prefix=\(prefix)", credentialsFile: credentials.path)))
    let contents = Self.contents(200)
    for bytes in contents { _ = try a.files.put(Data(bytes)) }
    let original = try contents.map { try #require(try Race.address(of: $0, in: a)) }
    Thread.sleep(forTimeInterval: 0.01)
    let (pid, lockKey) = try Self.sessions(of: a)
    // Every third content is uploaded again while both collect.
    let kept = contents.enumerated().filter { $0.offset % 3 == 0 }.map { ($0.offset, $0.element) }
    let reportB = Mutex<GCReport?>(nil)
    let failures = Mutex<[String]>([])
    hook.arm {
      // In A's first batch, half its DELETEs sent: A's sessions end (so its lock is free),
      // writers upload, and B collects the whole store while A is still going.
      _ = try Self.terminate(writer: pid, lockKey: lockKey, on: try Self.admin(b))
      failures.withLock { $0 = Self.upload(kept, to: b) }
      let r = try GarbageCollector(larder: b).collect(
        options: .init(grace: .zero, batchSize: 50, tempAge: .zero))
      reportB.withLock { $0 = r }
    }
    let reportA = try GarbageCollector(larder: a).collect(
      options: .init(grace: .zero, batchSize: 50, tempAge: .zero))
    let rb = try #require(reportB.withLock { $0 })
    #expect(failures.withLock { $0 } == [])
    // Each original row was removed by exactly one of them, unless a writer referenced it
    // before either got to it; a row a writer inserted anew (its content was gone) is kept.
    let unchanged = try kept.filter { try Race.address(of: $0.1, in: a) == original[$0.0] }.count
    #expect(reportA.blobsRemoved + rb.blobsRemoved == 200 - unchanged)
    #expect(rb.deletionsResumed > 0)
    #expect(reportA.blobsRemoved > 0 && rb.blobsRemoved > 0)
    #expect(try Race.count("blobs", in: a) == Int64(kept.count))
    #expect(try Race.count("blob_deletions", in: a) == 0)
    let (lost, findings) = try Self.check(kept, in: a)
    #expect(lost == [], "\(lost.count) of \(kept.count) acknowledged uploads lost")
    #expect(findings == [])
    #expect(try Self.check(kept, in: b).lost == [])
  }
}
