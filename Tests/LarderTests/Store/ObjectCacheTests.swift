import Foundation
@testable import Larder
import LarderTestSupport
import Testing

/// The per-process object cache never serves a row that a commit replaced or removed, whether
/// the commit came from this store or from a second store (a second process) on the directory.
@Suite struct ObjectCacheTests {
  @Test(TestCatalog.sqliteOnly) func smallContentIsServedFromMemoryUntilTheCatalogChanges() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url.appendingPathComponent("data"))
    let object = try larder.objects.put(bucket: "c", name: "a.bin", data: Data("small".utf8))
    #expect(larder.objects.cache.contentCount == 0)
    #expect(try larder.objects.smallContent(of: object) == Array("small".utf8))
    #expect(larder.objects.cache.contentCount == 1)

    // With the blob file moved away, the bytes still come: from memory, not the disk.
    let path = larder.blobs.path(forHex: object.file.sha256)
    try FileManager.default.moveItem(atPath: path, toPath: path + ".away")
    #expect(try larder.objects.smallContent(of: object) == Array("small".utf8))

    // A commit, seen by the next lookup, empties the contents with the rows.
    _ = try larder.objects.put(bucket: "c", name: "other.bin", data: Data("x".utf8))
    _ = try larder.objects.find(bucket: "c", name: "a.bin")
    #expect(larder.objects.cache.contentCount == 0)
    #expect(throws: LarderError.io(operation: "open", path: path, errno: ENOENT)) {
      try larder.objects.smallContent(of: object)
    }
    try FileManager.default.moveItem(atPath: path + ".away", toPath: path)
    #expect(try larder.objects.smallContent(of: object) == Array("small".utf8))
  }

  @Test(TestCatalog.sqliteOnly) func contentOverTheLimitIsNeitherReadNorKept() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url.appendingPathComponent("data"))
    let limit = Int(ObjectStore.smallContentLimit)
    let atLimit = try larder.objects.put(bucket: "c", name: "at.bin", data: Data(repeating: 7, count: limit))
    let over = try larder.objects.put(bucket: "c", name: "over.bin", data: Data(repeating: 8, count: limit + 1))
    #expect(try larder.objects.smallContent(of: over) == nil)
    #expect(larder.objects.cache.contentCount == 0)
    #expect(try larder.objects.smallContent(of: atLimit) == [UInt8](repeating: 7, count: limit))
    #expect(larder.objects.cache.contentCount == 1)
  }

  @Test func contentsStayWithinTheirCapacityAndAStaleReadIsNotKept() {
    let cache = ObjectCache(contentCapacity: 10)
    let epoch = cache.content(sha256: "a").epoch
    cache.storeContent(Array("123456".utf8), sha256: "a", epoch: epoch)
    #expect(cache.content(sha256: "a").bytes == Array("123456".utf8))
    // A second one would pass the capacity: the contents are emptied first.
    cache.storeContent(Array("abcdef".utf8), sha256: "b", epoch: epoch)
    #expect(cache.content(sha256: "a").bytes == nil)
    #expect(cache.content(sha256: "b").bytes == Array("abcdef".utf8))
    #expect(cache.contentCount == 1)
    // Larger than the whole capacity, or read under another epoch: not kept.
    cache.storeContent([UInt8](repeating: 0, count: 11), sha256: "c", epoch: epoch)
    cache.storeContent(Array("xy".utf8), sha256: "d", epoch: epoch &+ 1)
    #expect(cache.content(sha256: "c").bytes == nil)
    #expect(cache.content(sha256: "d").bytes == nil)
    #expect(cache.contentCount == 1)
  }

  @Test func rowsAreServedOnlyUnderTheStampTheyWereReadUnderAndNeverWithoutOne() throws {
    let cache = ObjectCache()
    let path = try ObjectPath(bucket: "c", name: "a.bin")
    var fetches = 0
    func lookup(_ stamp: Int64?) throws -> ObjectCache.Entry {
      try cache.entry(at: path, stamp: stamp) { _ in
        fetches += 1
        return nil
      }
    }
    let first = try lookup(5)
    #expect(try lookup(5).memo === first.memo)
    #expect(fetches == 1)
    // Another stamp: someone committed; the row is read again and the cache starts over.
    let second = try lookup(6)
    #expect(fetches == 2)
    #expect(second.memo !== first.memo)
    #expect(cache.count == 1)
    // No stamp (PostgreSQL, or a header that stayed torn): read every time, nothing kept or served.
    let unstamped = try lookup(nil)
    #expect(try lookup(nil).memo !== unstamped.memo)
    #expect(fetches == 4)
    #expect(try lookup(6).memo === second.memo)
    #expect(fetches == 4)
  }

  @Test(TestCatalog.sqliteOnly) func aMemoLivesExactlyAsLongAsItsCachedRow() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url.appendingPathComponent("data"))
    let path = try ObjectPath(bucket: "c", name: "a.bin")
    _ = try larder.objects.put(bucket: "c", name: "a.bin", data: Data("one".utf8))
    let (first, memo) = try larder.objects.findMemoized(path)
    var made = 0
    #expect(memo.value { made += 1; return first!.metageneration } == 1)
    let (_, again) = try larder.objects.findMemoized(path)
    #expect(again === memo)
    #expect(again.value { made += 1; return Int64(-1) } == 1)
    #expect(made == 1)
    // One memo holds one value per type.
    #expect(again.value { "text" } == "text")
    #expect(again.value { Int64(-1) } == 1)

    _ = try larder.objects.update(path, patch: ObjectPatch(cacheControl: "no-store"))
    let (after, fresh) = try larder.objects.findMemoized(path)
    #expect(fresh !== memo)
    #expect(fresh.value { after!.metageneration } == 2)
    #expect(after?.cacheControl == "no-store")
  }

  @Test(TestCatalog.sqliteOnly) func repeatedLookupsAreServedFromTheCache() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url.appendingPathComponent("data"))
    let put = try larder.objects.put(bucket: "c", name: "a.bin", data: Data("one".utf8))
    #expect(larder.objects.cache.count == 0)
    let first = try larder.objects.find(bucket: "c", name: "a.bin")
    #expect(first == put)
    #expect(larder.objects.cache.count == 1)
    #expect(try larder.objects.find(bucket: "c", name: "a.bin") == put)
    #expect(try larder.objects.find(bucket: "c", name: "missing") == nil)
    #expect(larder.objects.cache.count == 2)
  }

  @Test func overwriteUpdateAndDeleteInThisStoreAreSeenAtOnce() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url.appendingPathComponent("data"))
    _ = try larder.objects.put(bucket: "c", name: "a.bin", data: Data("one".utf8))
    _ = try larder.objects.find(bucket: "c", name: "a.bin")

    let replaced = try larder.objects.put(bucket: "c", name: "a.bin", data: Data("two!".utf8))
    let afterPut = try #require(try larder.objects.find(bucket: "c", name: "a.bin"))
    #expect(afterPut == replaced)
    #expect(try larder.files.data(of: afterPut.file) == Data("two!".utf8))

    let updated = try larder.objects.update(
      bucket: "c", name: "a.bin", patch: ObjectPatch(cacheControl: "no-store", rotateDownloadToken: true))
    let afterUpdate = try #require(try larder.objects.find(bucket: "c", name: "a.bin"))
    #expect(afterUpdate == updated)
    #expect(afterUpdate.metageneration == 2)
    #expect(afterUpdate.cacheControl == "no-store")
    #expect(afterUpdate.downloadTokens != replaced.downloadTokens)

    try larder.objects.delete(bucket: "c", name: "a.bin")
    #expect(try larder.objects.find(bucket: "c", name: "a.bin") == nil)
    // An absence is cached too, and a new put ends it.
    #expect(try larder.objects.find(bucket: "c", name: "a.bin") == nil)
    let again = try larder.objects.put(bucket: "c", name: "a.bin", data: Data("three".utf8))
    #expect(try larder.objects.find(bucket: "c", name: "a.bin") == again)
  }

  @Test(TestCatalog.sqliteOnly) func writesThroughASecondStoreOnTheSameDirectoryAreSeenAtOnce() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let first = try TestStore.open(at: directory)
    let second = try TestStore.open(at: directory)
    let original = try first.objects.put(bucket: "c", name: "a.bin", data: Data("one".utf8))
    // Fill the cache of every reader connection the first store may hand out.
    for _ in 0..<20 { #expect(try first.objects.find(bucket: "c", name: "a.bin") == original) }
    #expect(first.objects.cache.count == 1)

    let replaced = try second.objects.put(bucket: "c", name: "a.bin", data: Data("two!".utf8))
    let seen = try #require(try first.objects.find(bucket: "c", name: "a.bin"))
    #expect(seen == replaced)
    #expect(seen.generation > original.generation)
    #expect(try first.files.data(of: seen.file) == Data("two!".utf8))

    let updated = try second.objects.update(bucket: "c", name: "a.bin", patch: ObjectPatch(rotateDownloadToken: true))
    #expect(try first.objects.find(bucket: "c", name: "a.bin")?.downloadTokens == updated.downloadTokens)

    try second.objects.delete(bucket: "c", name: "a.bin")
    #expect(try first.objects.find(bucket: "c", name: "a.bin") == nil)
    #expect(throws: LarderError.notFound(bucket: "c", name: "a.bin")) {
      try first.objects.get(bucket: "c", name: "a.bin")
    }
  }

  @Test func concurrentLookupsNeverSeeAReplacedGenerationAfterTheWriteReturned() async throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let reader = try TestStore.open(at: directory)
    let writer = try TestStore.open(at: directory)
    var latest = try writer.objects.put(bucket: "c", name: "hot", data: Data("0".utf8)).generation
    for round in 1...30 {
      // Readers hammer the name on several connections while the other store replaces it.
      try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<4 {
          group.addTask { for _ in 0..<10 { _ = try reader.objects.find(bucket: "c", name: "hot") } }
        }
        try await group.waitForAll()
      }
      latest = try writer.objects.put(bucket: "c", name: "hot", data: Data("\(round)".utf8)).generation
      let seen = try await withThrowingTaskGroup(of: Int64?.self) { group in
        for _ in 0..<4 { group.addTask { try reader.objects.find(bucket: "c", name: "hot")?.generation } }
        return try await group.reduce(into: [Int64?]()) { $0.append($1) }
      }
      #expect(seen == Array(repeating: latest, count: 4), "round \(round)")
    }
  }
}
