import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// The dry run is the collection's own code with deletion switched off (one candidate query,
/// one loop over the content store): on every backend pass (the S3 pass runs this suite too),
/// its report is exactly what the run that follows does, and it changes nothing.
@Suite struct GCDryRunTests {
  @Test func aDryRunReportsExactlyWhatTheRunThenDoesAndChangesNothing() throws {
    let dir = ScratchDirectory()
    let larder = try TestStore.open(at: dir.url)
    // 40 contents: objects kept, deleted, replaced, shared between a kept and a deleted name,
    // and loose files; then a young set inside the grace period.
    for i in 0..<40 {
      let content = Data("content \(i) ".utf8) + Data(repeating: UInt8(i), count: 100 + i)
      _ = try larder.objects.put(bucket: "app", name: "a/\(i)", data: content)
      switch i % 5 {
      case 0: try larder.objects.delete(bucket: "app", name: "a/\(i)")
      case 1: _ = try larder.objects.put(bucket: "app", name: "a/\(i)", data: Data("replaced \(i)".utf8))
      case 2:
        _ = try larder.objects.put(bucket: "app", name: "b/\(i)", data: content)
        try larder.objects.delete(bucket: "app", name: "a/\(i)")
      case 3: _ = try larder.files.put(Data("loose \(i)".utf8))
      default: break
      }
    }
    try Fixture.age(larder, by: 7200)
    for i in 0..<6 {
      _ = try larder.files.put(Data("young loose \(i)".utf8))
      // A young file of an old orphan's content keeps that blob.
      _ = try larder.files.put(Data("loose \(i * 5 + 3)".utf8))
    }
    let before = try ["blobs", "files", "objects"].map { try Fixture.count(larder, $0) }

    let options = GarbageCollector.Options(grace: .seconds(3600), batchSize: 7)
    var dryOptions = options
    dryOptions.dryRun = true
    let dry = try GarbageCollector(larder: larder).collect(options: dryOptions)
    #expect(try ["blobs", "files", "objects"].map { try Fixture.count(larder, $0) } == before)

    let run = try GarbageCollector(larder: larder).collect(options: options)
    // 8 deleted (i%5 == 0), 8 replaced, 8 moved to b/ (their file released, blob kept), 8 loose.
    #expect(run.filesReleased == 32)
    // Deleted (8) and replaced (8) contents go; b/ keeps its blobs; of the 8 loose contents,
    // the 6 the young set put again ("loose 3", "loose 8", … "loose 28") stay: 18.
    #expect(run.blobsRemoved == 8 + 8 + (8 - 6))
    #expect(run.batches == (run.blobsRemoved + 6) / 7)
    for (name, value, expected) in [
      ("filesReleased", dry.filesReleased, run.filesReleased),
      ("blobsRemoved", dry.blobsRemoved, run.blobsRemoved),
      ("batches", dry.batches, run.batches),
      ("strayFilesRemoved", dry.strayFilesRemoved, run.strayFilesRemoved),
      ("uploadsExpired", dry.uploadsExpired, run.uploadsExpired),
    ] {
      #expect(value == expected, "\(name): the dry run said \(value), the run did \(expected)")
    }
    #expect(dry.blobBytesFreed == run.blobBytesFreed)
    #expect(dry.bytesFreed == run.bytesFreed)
    #expect(try Fixture.count(larder, "blobs") == before[0] - run.blobsRemoved)
    #expect(try Verifier(larder: larder).verify().isClean)

    // Nothing left to do: both say so.
    let dryAfter = try GarbageCollector(larder: larder).collect(options: dryOptions)
    #expect(dryAfter.filesReleased == 0 && dryAfter.blobsRemoved == 0)
  }
}
