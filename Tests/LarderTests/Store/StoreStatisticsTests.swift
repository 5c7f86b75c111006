import Foundation
import Larder
import LarderTestSupport
import Testing

/// `larder.statistics()` counts what the catalog holds, so that callers (the `/metrics` gauges)
/// need no SQL of their own.
@Suite struct StoreStatisticsTests {
  @Test func anEmptyStoreCountsNothing() throws {
    let larder = try TestStore.temporary()
    #expect(try larder.statistics() == StoreStatistics())
  }

  @Test func countsObjectsPerBucketFilesDistinctBlobsAndOpenUploads() throws {
    let larder = try TestStore.temporary()
    // Two objects share one content: two files, one blob of 5 bytes.
    _ = try larder.objects.put(bucket: "photos", name: "a.txt", data: Data("same!".utf8))
    _ = try larder.objects.put(bucket: "photos", name: "b.txt", data: Data("same!".utf8))
    _ = try larder.objects.put(bucket: "docs", name: "c.txt", data: Data("other content".utf8))
    // A file no object refers to still counts as a file with its blob.
    _ = try larder.files.put(Data("loose".utf8))
    let uploads = UploadStore(larder: larder)
    _ = try uploads.create(bucket: "docs", name: "big.bin", owner: nil, length: 100)

    let stats = try larder.statistics()
    #expect(stats.objectCount == 3)
    #expect(
      stats.buckets == [
        .init(name: "docs", objectCount: 1, logicalBytes: 13), .init(name: "photos", objectCount: 2, logicalBytes: 10),
      ])
    // Each bucket's bytes are its objects' sizes, shared content counted per object; they sum to the total.
    #expect(stats.logicalBytes == 23)
    #expect(stats.fileCount == 4)
    #expect(stats.blobCount == 3)
    #expect(stats.blobBytes == Int64("same!".utf8.count + "other content".utf8.count + "loose".utf8.count))
    #expect(stats.uploadsInProgress == 1)

    // A delete is seen at once; the blob stays until the collector runs.
    try larder.objects.delete(bucket: "docs", name: "c.txt")
    let after = try larder.statistics()
    #expect(after.objectCount == 2)
    #expect(after.buckets == [.init(name: "photos", objectCount: 2, logicalBytes: 10)])
    #expect(after.blobCount == 3)
  }

  @Test(TestCatalog.sqliteOnly) func checkpointLeavesOneSelfContainedCatalogFile() throws {
    let larder = try TestStore.temporary()
    _ = try larder.objects.put(bucket: "b", name: "x", data: Data("x".utf8))
    try larder.checkpoint()
    let wal = larder.directory.appendingPathComponent("larder.sqlite-wal").path
    let size = (try FileManager.default.attributesOfItem(atPath: wal)[.size] as? NSNumber)?.intValue
    #expect(size == 0)
    #expect(try larder.files.data(of: larder.objects.get(bucket: "b", name: "x").file) == Data("x".utf8))
  }
}
