import Foundation
import LarderTestSupport
import Synchronization
import Testing

@testable import Larder

/// The collector releases unreferenced files in batches of its batch size, reporting progress per batch.
@Suite struct ReleaseBatchingTests {
  @Test func unreferencedFilesAreReleasedInBatches() throws {
    let dir = ScratchDirectory("gc-batches")
    let larder = try TestStore.open(at: dir.url)
    for data in Fixture.contents(5, tag: "batch") { _ = try larder.files.put(data) }
    _ = try larder.objects.put(bucket: "b", name: "kept", data: Data("kept".utf8))
    try Fixture.age(larder, by: 60)
    let seen = Mutex<[Int]>([])
    let report = try GarbageCollector(larder: larder).collect(
      options: .init(
        grace: .zero, batchSize: 2,
        progress: { p in if p.phase == .files { seen.withLock { $0.append(p.processed) } } }))
    #expect(report.filesReleased == 5)
    #expect(seen.withLock { $0 } == [0, 2, 4, 5])
    #expect(try Fixture.count(larder, "files") == 1)
    #expect(report.blobsRemoved == 5)
    #expect(report.batches == 3)
  }
}
