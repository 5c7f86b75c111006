import Foundation
import Larder
import LarderTestSupport
import Testing

/// Many writers at once, in this store and in a second store on the same directory.
@Suite struct ConcurrencyTests {
  @Test func concurrentPutsFromTasksAndASecondStoreAreAllConsistent() async throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let first = try TestStore.open(at: directory)
    // A second instance has its own SQLite connections and locks, as a second process would.
    let second = try TestStore.open(at: directory)

    // 32 puts through the first store and 16 through the second; contents 0..<8 are shared by
    // both stores so that dedupe races across connections, the rest are unique.
    func content(_ i: Int) -> Data {
      var random = PseudoRandomBytes(seed: UInt64(i < 40 ? i % 8 : i))
      return Data(random.bytes(20_000 + (i < 40 ? i % 8 : i) * 1_000))
    }
    let jobs = (0..<48).map { i in (i, i < 32 ? first : second) }
    let stored = try await withThrowingTaskGroup(of: (Int, StoredObject).self) { group in
      for (i, larder) in jobs {
        group.addTask {
          (i, try larder.objects.put(bucket: "c", name: "obj/\(i)", data: content(i)))
        }
      }
      var out: [Int: StoredObject] = [:]
      for try await (i, object) in group { out[i] = object }
      return out
    }
    #expect(stored.count == 48)
    for i in 0..<48 {
      let bytes = content(i)
      #expect(stored[i]?.file.sha256 == sha256Hex(bytes))
      let viaFirst = try first.objects.get(bucket: "c", name: "obj/\(i)")
      let viaSecond = try second.objects.get(bucket: "c", name: "obj/\(i)")
      #expect(viaFirst == viaSecond)
      #expect(try first.files.data(of: viaFirst.file) == bytes)
      #expect(try second.files.data(of: viaSecond.file) == bytes)
    }
    let distinct = Set((0..<48).map { sha256Hex(content($0)) }).count
    #expect(distinct == 8 + 8)
    let violations = try first.catalog.read { db in try TestCatalog.foreignKeyViolations(db) }
    #expect(violations == 0)
    if !TestCatalog.isPostgres {
      let integrity = try first.catalog.read { db in try db.row("PRAGMA integrity_check")?[0] }
      #expect(integrity == .text("ok"))
    }
    #expect(try first.storeCounts() == [Int64(distinct), 48, 48])
    #expect(first.storeBlobFiles().count == distinct)
    #expect(first.storeTempFiles() == [])
    // Every blob row has its file, and every blob file has its row.
    let rows = try first.catalog.read { db in try db.rows("SELECT sha256 FROM blobs") }
    let fromRows = Set(rows.compactMap { $0.bytes("sha256") }.map { first.blobs.path(for: $0) })
    let onDisk = Set(first.storeBlobFiles().map { first.directory.appendingPathComponent($0).path })
    #expect(fromRows == onDisk)
  }

  @Test func concurrentReplacementsOfOneNameKeepIncreasingGenerations() async throws {
    let larder = try TestStore.temporary()
    let generations = try await withThrowingTaskGroup(of: Int64.self) { group in
      for i in 0..<16 {
        group.addTask { try larder.objects.put(bucket: "c", name: "hot", data: Data("v\(i)".utf8)).generation }
      }
      var all: [Int64] = []
      for try await g in group { all.append(g) }
      return all
    }
    #expect(Set(generations).count == 16)
    let final = try larder.objects.get(bucket: "c", name: "hot")
    #expect(final.generation == generations.max())
    #expect(try larder.storeCounts() == [16, 16, 1])
  }
}
