import Foundation
import Larder
import LarderImages
import LarderTestSupport
import Synchronization
import Testing

/// Variants as derived files of a real store (temp directory, real catalog).
@Suite struct VariantCacheTests {
  func withStore<T>(_ body: (Larder) throws -> T) throws -> T {
    let larder = try TestStore.temporary()
    defer { try? FileManager.default.removeItem(at: larder.directory) }
    return try body(larder)
  }

  @Test func aVariantIsRenderedOnceAndServedFromTheCache() throws {
    try withStore { larder in
      let pool = RenderPool(threads: 2, queueLength: 4)
      let images = ImageVariants(larder: larder, pool: pool)
      let photo = try larder.files.put(Data(try TestImages.solid(800, 600, as: .jpeg)), filename: "p.jpg")
      let a = try images.variant(of: photo, width: 200, height: 200, resize: .cover, format: .webp)
      let b = try images.variant(of: photo, width: 200, height: 200, resize: .cover, format: .webp)
      #expect(a.id == b.id && a.sha256 == b.sha256)
      #expect(a.contentType == "image/webp")
      #expect(pool.rendersStarted == 1)
      let image = try Vips.decode([UInt8](try larder.files.data(of: a)))
      #expect((image.width, image.height) == (200, 200))
      #expect(try larder.derived.statistics() == (1, a.size))
      // A second upload of the same bytes shares the variant.
      let copy = try larder.files.put(Data(try larder.files.data(of: photo)))
      #expect(try images.variant(of: copy, width: 200, height: 200, format: .webp).id == a.id)
      #expect(pool.rendersStarted == 1)
    }
  }

  @Test func concurrentIdenticalRequestsRenderOnce() throws {
    try withStore { larder in
      let pool = RenderPool(threads: 2, queueLength: 16)
      let images = ImageVariants(larder: larder, pool: pool)
      let photo = try larder.files.put(Data(try TestImages.solid(3000, 2000, as: .jpeg)))
      let ids = Mutex<[String]>([])
      DispatchQueue.concurrentPerform(iterations: 8) { _ in
        if let f = try? images.variant(of: photo, width: 256, format: .webp) {
          ids.withLock { $0.append(f.id) }
        }
      }
      let all = ids.withLock { $0 }
      #expect(all.count == 8 && Set(all).count == 1)
      #expect(pool.rendersStarted == 1)
    }
  }

  @Test func aFullQueueIsRefusedAsBusy() throws {
    let pool = RenderPool(threads: 1, queueLength: 0)
    let release = DispatchSemaphore(value: 0)
    let started = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
      _ = try? pool.run(key: "slow") {
        started.signal()
        release.wait()
        return 1
      }
    }
    started.wait()
    #expect(throws: ImageError.busy) { _ = try pool.run(key: "other") { 2 } }
    release.signal()
    while pool.pending > 0 { usleep(1000) }
    #expect(try pool.run(key: "other") { 2 } == 2)
  }

  @Test func gcRemovesVariantsWithTheirSource() throws {
    try withStore { larder in
      let images = ImageVariants(larder: larder, pool: RenderPool(threads: 1, queueLength: 4))
      let object = try larder.objects.put(
        bucket: "app", name: "p.png", data: Data(try TestImages.solid(400, 400, as: .png)))
      let variant = try images.variant(of: object.file, width: 64, format: .jpeg)
      // Kept while the source is: gc with no grace leaves both.
      var report = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
      #expect(report.blobsRemoved == 0)
      #expect(try larder.files.file(id: variant.id) != nil)
      try larder.objects.delete(bucket: "app", name: "p.png")
      report = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
      #expect(report.blobsRemoved == 2)
      #expect(try larder.files.file(id: variant.id) == nil)
      #expect(try larder.derived.statistics() == (0, 0))
    }
  }

  @Test func gcDryRunCountsTheVariantsTheRealRunReleases() throws {
    try withStore { larder in
      let images = ImageVariants(larder: larder, pool: RenderPool(threads: 1, queueLength: 4))
      let gone = try larder.objects.put(
        bucket: "app", name: "gone.png", data: Data(try TestImages.solid(400, 400, as: .png)))
      let kept = try larder.objects.put(
        bucket: "app", name: "kept.png", data: Data(try TestImages.solid(300, 300, [1, 2, 3], as: .png)))
      for width in [32, 64] { _ = try images.variant(of: gone.file, width: width, format: .jpeg) }
      let keptVariant = try images.variant(of: kept.file, width: 32, format: .webp)
      try larder.objects.delete(bucket: "app", name: "gone.png")
      let collector = GarbageCollector(larder: larder)
      let dry = try collector.collect(options: .init(grace: .zero, dryRun: true))
      #expect(dry.variantsReleased == 2)
      #expect(dry.filesReleased == 3)  // the source's file and its two variants
      #expect(dry.blobsRemoved == 3)
      #expect(try larder.derived.statistics().count == 3)  // nothing changed
      let real = try collector.collect(options: .init(grace: .zero))
      #expect(real.variantsReleased == dry.variantsReleased)
      #expect(real.filesReleased == dry.filesReleased)
      #expect(real.blobsRemoved == dry.blobsRemoved)
      #expect(real.blobBytesFreed == dry.blobBytesFreed)
      #expect(try larder.derived.statistics().count == 1)
      #expect(try larder.files.file(id: keptVariant.id) != nil)
      let again = try collector.collect(options: .init(grace: .zero, dryRun: true))
      #expect((again.variantsReleased, again.filesReleased, again.blobsRemoved) == (0, 0, 0))
    }
  }

  @Test func theLRUBudgetReleasesTheOldestVariants() throws {
    try withStore { larder in
      let images = ImageVariants(larder: larder, pool: RenderPool(threads: 1, queueLength: 4))
      let photo = try larder.files.put(Data(try TestImages.solid(400, 400, as: .png)))
      let first = try images.variant(of: photo, width: 100, format: .png)
      usleep(5000)  // a later `used_at`
      let second = try images.variant(of: photo, width: 101, format: .png)
      usleep(5000)
      let third = try images.variant(of: photo, width: 102, format: .png)
      // Within budget: nothing goes.
      #expect(try larder.derived.evict(toFit: first.size + second.size + third.size) == 0)
      // Room for the two most recently used: only the oldest goes.
      #expect(try larder.derived.evict(toFit: second.size + third.size) == 1)
      #expect(try larder.files.file(id: first.id) == nil)
      #expect(try larder.files.file(id: second.id) != nil)
      #expect(try larder.files.file(id: third.id) != nil)
      #expect(try larder.derived.statistics() == (2, second.size + third.size))
      // A budget smaller than any variant releases them all; the source stays.
      #expect(try larder.derived.evict(toFit: 0) == 2)
      #expect(try larder.derived.statistics() == (0, 0))
      #expect(try larder.files.file(id: photo.id) != nil)
    }
  }

  @Test func nonImagesAndLargeSourcesAreRefusedBeforeReading() throws {
    try withStore { larder in
      let images = ImageVariants(larder: larder, limits: .init(maxSourceBytes: 1000))
      let text = try larder.files.put(Data("hello, not an image".utf8))
      #expect(throws: ImageError.notAnImage(detectedType: text.contentType)) {
        _ = try images.variant(of: text, width: 10)
      }
      let big = try larder.files.put(Data(try TestImages.solid(500, 500, as: .png)))
      #expect(throws: ImageError.sourceTooLarge(size: big.size, limit: 1000)) {
        _ = try images.variant(of: big, width: 10)
      }
      #expect(throws: ImageError.self) { _ = try images.variant(of: big, width: 2501) }
    }
  }
}
