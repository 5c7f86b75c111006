import Foundation
import LarderTestSupport
import LarderCrypto
import Testing

@testable import Larder

/// The upload write path (``BlockSink``): bytes arrive in chunks of any size, are gathered into
/// blocks, written, and hashed on another core while the next block arrives; what is stored and
/// what the digests say must be exactly the bytes sent, in order, whatever the chunking.
@Suite struct UploadWritePathTests {
  /// Chunk sizes that start, straddle and end blocks in every way, and one write larger than a
  /// block arriving on an empty buffer (the path that skips the copy) and on a partial one.
  static let chunkings: [[Int]] = {
    let block = BlockSink.blockSize
    return [
      [1, block - 1, block + 1, 7, 3 * block, 12_345],
      [block, block, block],
      [32 * 1024, 2 * block + 5, 1, block - 6, 32 * 1024],
    ]
  }()

  @Test(arguments: chunkings)
  func chunksOfAnySizeAreStoredAndHashedExactly(sizes: [Int]) throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url.appendingPathComponent("data"))
    var random = PseudoRandomBytes(seed: UInt64(sizes.count) &* 7_919)
    let content = random.bytes(sizes.reduce(0, +))
    let md5 = Digest.hash(.md5, content)
    // A client MD5 to check: MD5 is then hashed inline too, as its own task beside SHA-256.
    for expectedMD5 in [nil, md5] {
      let writer = try larder.files.makeWriter(options: .init(expectedMD5: expectedMD5))
      var offset = 0
      for size in sizes {
        try content[offset..<offset + size].withUnsafeBytes { try writer.write($0) }
        offset += size
      }
      #expect(writer.byteCount == Int64(content.count))
      let staged = try writer.finish()
      #expect(staged.sha256 == Digest.hash(.sha256, content))
      #expect(staged.md5 == expectedMD5)
      #expect(staged.size == Int64(content.count))
      #expect(try Data(contentsOf: URL(fileURLWithPath: try #require(staged.localPath))) == Data(content))
      staged.discard()
    }
  }

  @Test func aWrongClientMD5IsRefusedAfterEveryBlockWasHashed() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url.appendingPathComponent("data"))
    var random = PseudoRandomBytes(seed: 42)
    let content = random.bytes(3 * BlockSink.blockSize + 11)
    var wrong = Digest.hash(.md5, content)
    wrong[0] ^= 1
    let writer = try larder.files.makeWriter(options: .init(expectedMD5: wrong))
    try writer.write(content)
    #expect(throws: LarderError.self) { try writer.finish() }
    #expect(try FileManager.default.contentsOfDirectory(atPath: larder.directory.appendingPathComponent("tmp").path)
      .isEmpty)
  }

  /// Without the hint the fsync at the end of a body writes all of it while the client waits.
  @Test func theWritebackHintIsAvailableOnLinux() {
    #expect(POSIX.canStartWriteback)
  }

  /// An append told its body's length (a PATCH's `Content-Length`) takes checkpoints inside the
  /// body as before, but none at its end: finishing commits that offset a moment later, and one
  /// commit (one fsync) per request is what a PATCH costs.
  @Test func anAppendThatKnowsItsBodyLengthTakesNoCheckpointAtItsEnd() throws {
    let scratch = try UploadScratch()
    let larder = try TestStore.open(at: scratch.url)
    let store = UploadStore(larder: larder, checkpoints: UploadCheckpoints(bytes: 64 * 1024, interval: .seconds(3600)))
    let data = bytes(256 * 1024, seed: 9)
    let id = try store.create(bucket: "app", name: "k.bin", owner: nil, length: Int64(data.count)).id

    let first = try store.beginAppend(id: id, owner: nil, offset: 0)
    first.expectedBodyLength = 128 * 1024
    for start in stride(from: 0, to: 128 * 1024, by: 16 * 1024) {
      try first.write(Data(data[start..<start + 16 * 1024]))
    }
    // The checkpoint at 64 KiB was taken; the one the body's last chunk reached was not.
    #expect(first.committedOffset == 64 * 1024)
    #expect(try store.upload(id: id, owner: nil).offset == 64 * 1024)
    guard case .progress(let upload) = try first.finish() else {
      Issue.record("expected progress")
      return
    }
    #expect(upload.offset == 128 * 1024)
    #expect(try store.upload(id: id, owner: nil).offset == 128 * 1024)

    // Without a declared body length the same append checkpoints at its end, as before.
    let second = try store.beginAppend(id: id, owner: nil, offset: 128 * 1024)
    for start in stride(from: 128 * 1024, to: 192 * 1024, by: 16 * 1024) {
      try second.write(Data(data[start..<start + 16 * 1024]))
    }
    #expect(try store.upload(id: id, owner: nil).offset == 192 * 1024)
    _ = try second.finish()

    guard case .complete(let done) = try append(store, id, at: 192 * 1024, data[(192 * 1024)...]) else {
      Issue.record("expected completion")
      return
    }
    #expect(done.sha256Hex == hex(data))
    #expect(try larder.files.data(of: try store.publish(done).file) == Data(data))
  }
}
