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

  /// Bytes of content the store holds: its catalog's figure and, with local blobs, the disk's.
  func storedBytes(_ larder: Larder) throws -> (catalog: Int64, disk: Int64?) {
    let catalog = try larder.statistics().blobBytes
    guard TestStore.blobsBase == nil else { return (catalog, nil) }
    var disk: Int64 = 0
    let walker = FileManager.default.enumerator(
      at: larder.blobs.blobsDirectory, includingPropertiesForKeys: [.fileSizeKey, .isRegularFileKey])
    while let url = walker?.nextObject() as? URL {
      guard let values = try? url.resourceValues(forKeys: [.fileSizeKey, .isRegularFileKey]),
        values.isRegularFile == true
      else { continue }
      disk += Int64(values.fileSize ?? 0)
    }
    return (catalog, disk)
  }

  /// Issue 37.2: requests for ever other sizes of one image (of random pixels, so nothing
  /// compresses) never keep more than the budget, neither in the catalog nor on disk: what the
  /// LRU releases leaves the disk at once, not at the next gc.
  @Test func distinctSizesStayWithinTheBudgetOnDisk() throws {
    try withStore { larder in
      let budget: Int64 = 3 << 20
      let images = ImageVariants(
        larder: larder, limits: .init(cacheBytes: budget, variantsPerSource: nil),
        pool: RenderPool(threads: 2, queueLength: 4))
      let photo = try larder.files.put(Data(try TestImages.noisePNG(300, 300)))
      let source = try storedBytes(larder)
      var kept = 0
      for i in 0..<60 {
        let transform = ImageTransform(width: 200 + 10 * i, format: .fixed(.png))
        if case .kept = try images.rendition(of: photo, transform: transform, format: .png) { kept += 1 }
        let derived = try larder.derived.statistics()
        #expect(derived.bytes <= budget, "after \(i + 1) requests")
        let stored = try storedBytes(larder)
        #expect(stored.catalog - source.catalog == derived.bytes, "after \(i + 1) requests")
        if let disk = stored.disk, let before = source.disk {
          #expect(disk - before <= budget, "after \(i + 1) requests: \(disk - before) bytes on disk")
        }
      }
      #expect(kept == 60)  // every variant fits on its own
    }
  }

  /// Past the per-source cap, that source's least recently used variant goes; the newest and
  /// other sources' variants stay.
  @Test func thePerSourceCapReleasesThatSourcesOldestVariant() throws {
    try withStore { larder in
      let images = ImageVariants(
        larder: larder, limits: .init(variantsPerSource: 3), pool: RenderPool(threads: 1, queueLength: 4))
      let photo = try larder.files.put(Data(try TestImages.solid(300, 300, as: .png)))
      let other = try larder.files.put(Data(try TestImages.solid(300, 300, [1, 2, 3], as: .png)))
      let otherVariant = try images.variant(of: other, width: 50, format: .png)
      var made: [File] = []
      for width in [60, 61, 62, 63, 64] {
        made.append(try images.variant(of: photo, width: width, format: .png))
        usleep(5000)  // a later `used_at`
      }
      #expect(try larder.derived.statistics().count == 4)
      #expect(try made.map { try larder.files.file(id: $0.id) != nil } == [false, false, true, true, true])
      #expect(try larder.files.file(id: otherVariant.id) != nil)
      #expect(try larder.files.file(id: photo.id) != nil)
    }
  }

  /// A variant larger than the whole budget is rendered and handed out, never kept; a budget
  /// of 0 keeps nothing. Nothing of it stays in the store.
  @Test func aVariantLargerThanTheBudgetIsNotKept() throws {
    try withStore { larder in
      let photo = try larder.files.put(Data(try TestImages.noisePNG(200, 200)))
      let before = try storedBytes(larder)
      for budget in [Int64(0), 1000] {
        let images = ImageVariants(
          larder: larder, limits: .init(cacheBytes: budget), pool: RenderPool(threads: 1, queueLength: 4))
        let r = try images.rendition(of: photo, transform: ImageTransform(width: 100), format: .png)
        guard case .transient(let bytes) = r else {
          Issue.record("budget \(budget): kept")
          continue
        }
        #expect(try Vips.decode(bytes).width == 100)
        #expect(try larder.derived.statistics() == (0, 0))
        #expect(try storedBytes(larder) == before)
      }
    }
  }

  /// With a list of sizes, a request's width and height snap to the nearest (the larger on a
  /// tie): requests between two sizes share one variant.
  @Test func sizesSnapToTheNearestAllowed() throws {
    let limits = ImageVariants.Limits(sizes: [256, 64, 128])
    let cases: [(Int?, Int?, Int?, Int?)] = [
      (100, nil, 128, nil), (90, nil, 64, nil), (96, nil, 128, nil), (1, 2500, 64, 256), (nil, 200, nil, 256),
    ]
    for (w, h, ew, eh) in cases {
      let t = limits.snapped(ImageTransform(width: w, height: h))
      #expect(t.width == ew && t.height == eh, "\(String(describing: w))x\(String(describing: h))")
    }
    try withStore { larder in
      let pool = RenderPool(threads: 1, queueLength: 4)
      let images = ImageVariants(larder: larder, limits: limits, pool: pool)
      let photo = try larder.files.put(Data(try TestImages.solid(400, 200, as: .png)))
      let a = try images.variant(of: photo, width: 100, format: .png)
      let b = try images.variant(of: photo, width: 120, format: .png)
      #expect(a.id == b.id && pool.rendersStarted == 1)
      #expect(try Vips.decode([UInt8](try larder.files.data(of: a))).width == 128)
    }
  }

  /// One client has at most `perClient` renders queued or running (one more is refused at once,
  /// the server's 429); queued renders start with the client that has the fewest running, so
  /// another client's render starts before the first client's backlog.
  @Test func aClientGetsItsShareOfThePoolAndNoMore() throws {
    let pool = RenderPool(threads: 1, queueLength: 8, perClient: 3)
    let release = DispatchSemaphore(value: 0)
    let started = DispatchSemaphore(value: 0)
    let order = Mutex<[String]>([])
    let group = DispatchGroup()
    func submit(_ key: String, _ client: String, pending: Int) {
      DispatchQueue.global().async(group: group) {
        _ = try? pool.run(key: key, client: client) {
          order.withLock { $0.append(key) }
          started.signal()
          release.wait()
          return 0
        }
      }
      while pool.pending < pending { usleep(1000) }
    }
    submit("a1", "A", pending: 1)
    started.wait()  // a1 runs and holds the one thread
    submit("a2", "A", pending: 2)
    submit("a3", "A", pending: 3)
    #expect(throws: ImageError.clientBusy) { _ = try pool.run(key: "a4", client: "A") { 4 } }
    submit("b1", "B", pending: 4)
    for _ in 0..<4 { release.signal() }
    group.wait()
    #expect(order.withLock { $0 } == ["a1", "b1", "a2", "a3"])
    #expect(pool.rendersStarted == 4)
    #expect(try pool.run(key: "a4", client: "A") { 4 } == 4)
  }

  /// With two threads, one client runs one render at a time: the other thread is there for the
  /// next client, whose render starts while the first client's second still waits.
  @Test func aClientLeavesAThreadForOthers() throws {
    let pool = RenderPool(threads: 2, queueLength: 8, perClient: 4)
    let release = DispatchSemaphore(value: 0)
    let started = DispatchSemaphore(value: 0)
    let group = DispatchGroup()
    for (key, client) in [("a1", "A"), ("a2", "A"), ("b1", "B")] {
      DispatchQueue.global().async(group: group) {
        _ = try? pool.run(key: key, client: client) {
          started.signal()
          release.wait()
          return 0
        }
      }
      if key == "a1" { started.wait() }
      while pool.pending < (key == "a1" ? 1 : key == "a2" ? 2 : 3) { usleep(1000) }
    }
    started.wait()  // b1 started beside a1, a2 waits
    #expect(pool.rendersStarted == 2)
    for _ in 0..<3 { release.signal() }
    group.wait()
    #expect(pool.rendersStarted == 3)
  }
}
