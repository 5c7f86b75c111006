import Foundation
import LarderTestSupport
import LarderCrypto
import Testing

@testable import Larder

@Suite struct ModelConcurrencyTests {
  /// 8 tasks × 200 random saves and deletes over shared ids; the catalog must stay consistent.
  @Test func manyTasksSavingAndDeletingKeepTheCatalogConsistent() async throws {
    let larder = try TestStore.temporary()
    let files = try (0..<8).map { try larder.files.put(Data("shared-\($0)".utf8)) }
    try await withThrowingTaskGroup(of: Void.self) { group in
      for worker in 0..<8 {
        group.addTask {
          var rng = SeededGenerator(seed: UInt64(worker) + 100)
          for step in 0..<200 {
            let id = "g\(Int.random(in: 0..<40, using: &rng))"
            if Int.random(in: 0..<3, using: &rng) == 0 {
              try larder.models.delete(Gallery.self, id: id)
            } else {
              let pick = { (r: inout SeededGenerator) in files[Int.random(in: 0..<files.count, using: &r)] }
              let g = Gallery(
                id: id, name: "w\(worker)-\(step)", avatar: Bool.random(using: &rng) ? pick(&rng) : nil,
                album: (0..<Int.random(in: 0..<3, using: &rng)).map { _ in pick(&rng) },
                byName: ["k": pick(&rng)])
              try larder.models.save(g)
            }
          }
        }
      }
      try await group.waitForAll()
    }
    #expect(try larder.foreignKeyProblems() == 0)
    // Every record's attachment rows are exactly what discovery finds in its body.
    let galleries = try larder.models.query(Query(Gallery.self))
    var expected: Set<AttachmentRow> = []
    for g in galleries {
      for a in try FileDiscovery.attachments(in: g) {
        expected.insert(AttachmentRow(type: "Gallery", id: g.id, property: a.property, fileID: a.fileID))
      }
      #expect(try larder.models.attachments(of: Gallery.self, id: g.id).map(\.position) == Array(0..<(g.album.count + (g.avatar == nil ? 1 : 2))))
    }
    #expect(try larder.attachmentRows() == expected)
    #expect(try larder.recordCount() == galleries.count)
  }
}

@Suite struct FileReadTests {
  @Test func maxSizeEqualUnderAndOver() throws {
    let larder = try TestStore.temporary()
    let file = try larder.files.put(Data("0123456789".utf8))
    #expect(try larder.files.data(of: file, maxSize: 10) == Data("0123456789".utf8))
    #expect(try larder.files.data(of: file, maxSize: 11) == Data("0123456789".utf8))
    #expect(throws: LarderError.downloadSizeExceeded(size: 10, maxSize: 9)) { try larder.files.data(of: file, maxSize: 9) }
    #expect(throws: LarderError.downloadSizeExceeded(size: 10, maxSize: 0)) { try larder.files.data(of: file, maxSize: 0) }
    let empty = try larder.files.put(Data())
    #expect(try larder.files.data(of: empty, maxSize: 0) == Data())
  }

  /// 200 MiB streamed in from an async sequence and back out in 1 MiB chunks.
  @Test func streamsTwoHundredMebibytesInAndOutInBoundedChunks() async throws {
    let larder = try TestStore.temporary()
    let chunkSize = 1 << 20
    let chunkCount = 200
    var rng = SeededGenerator(seed: 200)
    var block = [UInt8](repeating: 0, count: chunkSize)
    block.withUnsafeMutableBytes { raw in
      for i in 0..<(chunkSize / 8) { raw.storeBytes(of: rng.next(), toByteOffset: i * 8, as: UInt64.self) }
    }
    let base = block
    // Each chunk is the random block stamped with its index, so no two chunks are equal.
    @Sendable func chunk(_ n: Int) -> Data {
      var d = Data(base)
      withUnsafeBytes(of: UInt64(n).littleEndian) { d.replaceSubrange(0..<8, with: $0) }
      return d
    }
    let expected = Digest(.sha256)
    for n in 0..<chunkCount { chunk(n).withUnsafeBytes { expected.update($0) } }
    let expectedHex = Hex.encode(expected.finalize())

    let counter = Counter()
    let stream = AsyncStream<Data> { counter.next(below: chunkCount).map(chunk) }
    let file = try await larder.files.put(stream, filename: "big.bin")
    #expect(file.size == Int64(chunkSize * chunkCount))
    #expect(file.sha256 == expectedHex)

    let reader = try larder.files.open(file)
    let actual = Digest(.sha256)
    var sizes: [Int: Int] = [:]
    try reader.forEachChunk { bytes in
      sizes[bytes.count, default: 0] += 1
      actual.update(bytes)
    }
    #expect(sizes == [chunkSize: chunkCount])
    #expect(Hex.encode(actual.finalize()) == expectedHex)
    #expect(throws: LarderError.downloadSizeExceeded(size: Int64(chunkSize * chunkCount), maxSize: 5 << 20)) {
      try larder.files.data(of: file, maxSize: 5 << 20)
    }
  }
}

/// Hands out 0, 1, 2, … up to a bound, from any thread.
final class Counter: @unchecked Sendable {
  private let lock = NSLock()
  private var value = 0
  func next(below bound: Int) -> Int? {
    lock.lock()
    defer { lock.unlock() }
    guard value < bound else { return nil }
    defer { value += 1 }
    return value
  }
}
