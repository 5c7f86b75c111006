import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// `ObjectStore.smallContent(of:)` with the blobs in S3.
@Suite(.enabled(if: LoopbackS3.isAvailable, "needs the loopback S3 engine"))
struct SmallContentTests {
  /// It used to open a file under `blobs/`, which S3 mode never has, and threw ENOENT (issue 21):
  /// a small object's bytes come from wherever they live.
  @Test func smallContentReadsTheBytesFromTheBucket() throws {
    let (directory, prefix) = BlobDeletionRaceTests.fresh()
    defer { try? FileManager.default.removeItem(at: directory) }
    let larder = try BlobDeletionRaceTests.store(at: directory, prefix: prefix)
    let bytes = Array("small content in S3 \(UUID().uuidString)".utf8)
    let object = try larder.objects.put(bucket: "app", name: "small.txt", data: Data(bytes))
    #expect(try larder.objects.smallContent(of: object) == bytes)
    // Twice: the second may come from the object cache, and must be the same bytes.
    #expect(try larder.objects.smallContent(of: object) == bytes)
  }
}
