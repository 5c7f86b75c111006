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
    let larder = try TestStore.open(at: directory)
    let other = try TestStore.open(at: directory)
    // A connection of the test's own, as another process would have.
    let watch = try #require(WALIndexWatch(connection: try SQLiteDatabase(path: larder.directory.appendingPathComponent("larder.sqlite").path)))
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

  @Test func theCatalogsCommitStampIsTheHeadersCounter() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url.appendingPathComponent("data"))
    let watch = try #require(WALIndexWatch(connection: try SQLiteDatabase(path: larder.directory.appendingPathComponent("larder.sqlite").path)))
    let before = try #require(larder.catalog.commitStamp())
    #expect(before == watch.stamp())
    _ = try larder.objects.put(bucket: "c", name: "a.bin", data: Data("one".utf8))
    #expect(larder.catalog.commitStamp() == watch.stamp())
    #expect(larder.catalog.commitStamp() != before)
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
    #expect(stamp(header) == 7)
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

  @Test func aFileNotInWALModeHasNoWatchAndGetsNoSharedMemory() throws {
    let scratch = try StoreScratch()
    let path = scratch.url.appendingPathComponent("x.sqlite").path
    let db = try SQLiteDatabase(path: path)
    try db.execute("PRAGMA journal_mode=DELETE")
    try db.execute("CREATE TABLE t (a)")
    #expect(WALIndexWatch(connection: db) == nil)
    #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
  }

  @Test func watchingNeverDropsSQLitesLocksOnTheSharedMemory() throws {
    // The first version read the header through a descriptor of its own; closing it released
    // every POSIX lock this process held on the `-shm` file. With SQLite's lock in place a
    // second process cannot take the index over: here, while watches come and go, another
    // connection still sees this store's commits through the same index.
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let larder = try TestStore.open(at: directory)
    for _ in 0..<3 { _ = WALIndexWatch(connection: try SQLiteDatabase(path: larder.directory.appendingPathComponent("larder.sqlite").path)) }
    let lock = try readLockState(of: larder.directory.appendingPathComponent("larder.sqlite").path + "-shm")
    #expect(lock.contains("READ") || lock.contains("WRITE"), "\(lock)")
    let before = try #require(larder.catalog.commitStamp())
    _ = try larder.objects.put(bucket: "c", name: "a.bin", data: Data("one".utf8))
    #expect(larder.catalog.commitStamp() != before)
  }

  /// This process's POSIX locks on `path`, as /proc/locks lists them (by inode).
  private func readLockState(of path: String) throws -> String {
    var info = stat()
    guard stat(path, &info) == 0 else { throw POSIXError(.ENOENT) }
    let text = try String(contentsOfFile: "/proc/locks", encoding: .utf8)
    let mine = "\(getpid()) "
    return text.split(separator: "\n").filter {
      $0.contains("POSIX") && $0.contains(mine) && $0.contains(":\(info.st_ino) ")
    }.joined(separator: "\n")
  }
}
