import Foundation
@testable import Larder
import LarderTestSupport
import Testing

/// The object cache learns of commits from the WAL-index header in `larder.sqlite-shm`
/// instead of a read transaction per lookup: the stamp must move with every commit, by any
/// connection, and a header it cannot trust must never read as "unchanged".
@Suite(TestCatalog.sqliteOnly) struct WALIndexWatchTests {
  @Test func aCommitByAnyConnectionMovesTheStampAndReadsDoNot() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let larder = try Larder(at: directory)
    let other = try Larder(at: directory)
    let watch = try #require(WALIndexWatch(databasePath: larder.catalog.path))
    _ = try larder.objects.put(bucket: "c", name: "a.bin", data: Data("one".utf8))

    let before = try #require(watch.stamp())
    for _ in 0..<5 { _ = try larder.objects.find(bucket: "c", name: "a.bin") }
    _ = try other.objects.find(bucket: "c", name: "a.bin")
    #expect(watch.stamp() == before)

    _ = try other.objects.put(bucket: "c", name: "b.bin", data: Data("two".utf8))
    let afterOther = try #require(watch.stamp())
    #expect(afterOther != before)
    try larder.objects.delete(bucket: "c", name: "a.bin")
    let afterOwn = try #require(watch.stamp())
    #expect(afterOwn != afterOther)
    // One transaction that changes a page, one step of the counter; one that changes none
    // writes no frame, and nothing changed for a cache either.
    try larder.catalog.write { db in try db.execute("UPDATE objects SET metageneration = metageneration + 1") }
    #expect(watch.stamp() == afterOwn + 1)
    try larder.catalog.write { db in try db.execute("UPDATE objects SET metageneration = 5 WHERE 0") }
    #expect(watch.stamp() == afterOwn + 1)
  }

  @Test func theCatalogsReaderConnectionsUseTheWatch() throws {
    let scratch = try StoreScratch()
    let larder = try Larder(at: scratch.url.appendingPathComponent("data"))
    let version = try larder.catalog.read(snapshot: false) { db in
      #expect((db as? SQLiteDatabase)?.changeWatch != nil)
      return try db.dataVersion()
    }
    let stamp = try #require(version)
    #expect(stamp & WALIndexWatch.stampTag != 0)
    #expect(stamp == WALIndexWatch(databasePath: larder.catalog.path)?.stamp())
  }

  @Test func aHeaderCaughtMidWriteOrOfAnotherFormatIsNotTrusted() {
    var header = [UInt8](repeating: 0, count: 96)
    func set(_ value: UInt32, at offset: Int) {
      withUnsafeBytes(of: value) { for (i, b) in $0.enumerated() { header[offset + i] = b } }
    }
    func stamp(_ bytes: [UInt8]) -> Int64? { bytes.withUnsafeBytes { WALIndexWatch.stamp(header: $0) } }
    for copy in [0, 48] {
      set(WALIndexWatch.indexVersion, at: copy)
      set(7, at: copy + 8)
      header[copy + 12] = 1
    }
    #expect(stamp(header) == WALIndexWatch.stampTag | 7)
    #expect(stamp(Array(header.prefix(95))) == nil)

    var torn = header
    torn[48 + 8] = 8  // the second copy already says 8, the first still 7
    #expect(stamp(torn) == nil)
    var uninitialised = header
    uninitialised[12] = 0
    uninitialised[60] = 0
    #expect(stamp(uninitialised) == nil)
    var otherVersion = header
    otherVersion[0] &+= 1
    otherVersion[48] &+= 1
    #expect(stamp(otherVersion) == nil)
  }

  @Test func withoutAReadableSharedMemoryFileThereIsNoWatch() throws {
    let scratch = try StoreScratch()
    let path = scratch.url.appendingPathComponent("x.sqlite").path
    #expect(WALIndexWatch(databasePath: path) == nil)
    // An all-zero file (not initialised by SQLite) is not a header.
    FileManager.default.createFile(atPath: path + "-shm", contents: Data(count: 32 * 1024))
    #expect(WALIndexWatch(databasePath: path) == nil)
  }
}
