import Foundation
import LarderTestSupport
import Larder
import LarderCrypto
import Testing

/// Content goes in and comes back byte for byte, whatever its size.
@Suite struct RoundTripTests {
  @Test func emptyContentRoundTrips() throws {
    let larder = try TestStore.temporary()
    let file = try larder.files.put(Data(), filename: "empty")
    #expect(file.size == 0)
    #expect(file.sha256 == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    #expect(file.md5 == "d41d8cd98f00b204e9800998ecf8427e")
    #expect(file.md5Base64 == "1B2M2Y8AsgTpgAmY7PhCfg==")
    #expect(file.contentType == "application/x-empty")
    #expect(try larder.files.data(of: file, maxSize: 0) == Data())
    #expect(larder.storeBlobFiles() == ["blobs/sha256/e3/b0/\(file.sha256)"])
    #expect(try larder.storeCounts() == [1, 1, 0])
  }

  @Test func knownDigestVectors() throws {
    let larder = try TestStore.temporary()
    let abc = try larder.files.put(Data("abc".utf8))
    #expect(abc.sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    #expect(abc.md5 == "900150983cd24fb0d6963f7d28e17f72")
    #expect(abc.md5Base64 == "kAFQmDzST7DWlj99KOF/cg==")
    #expect(abc.size == 3)
  }

  @Test(arguments: [1, 2, 100, 4095, 4096, 65_537])
  func smallContentRoundTrips(size: Int) throws {
    let larder = try TestStore.temporary()
    var random = PseudoRandomBytes(seed: UInt64(size))
    let bytes = random.bytes(size)
    let file = try larder.files.put(Data(bytes), filename: "small.bin")
    #expect(file.size == Int64(size))
    #expect(file.sha256 == sha256Hex(bytes))
    #expect(file.filename == "small.bin")
    #expect(try larder.files.data(of: file) == Data(bytes))
    let fetched = try #require(try larder.files.file(id: file.id))
    #expect(fetched.sha256 == file.sha256)
    #expect(fetched.size == file.size)
    #expect(fetched.md5 == file.md5)
    // Ranges are clamped to the content.
    #expect(try larder.files.data(of: file, range: 1..<3) == Data(bytes[1..<min(3, size)]))
    #expect(try larder.files.data(of: file, range: Int64(size - 1)..<Int64(size + 100)) == Data([bytes[size - 1]]))
    #expect(try larder.files.data(of: file, range: Int64(size + 5)..<Int64(size + 9)) == Data())
    #expect(larder.storeTempFiles() == [])
  }

  /// `put(contentsOf:)` streams 1 MiB chunks: one byte under, exactly at, and one byte over the boundary.
  @Test(arguments: [(1 << 20) - 1, 1 << 20, (1 << 20) + 1, (2 << 20) + 1])
  func chunkBoundaryContentRoundTrips(size: Int) throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url.appendingPathComponent("data"))
    var random = PseudoRandomBytes(seed: 0xC0FFEE ^ UInt64(size))
    let bytes = random.bytes(size)
    let source = try scratch.file("source.bin", bytes)
    var reported: [Int64] = []
    let file = try larder.files.put(contentsOf: source, declaredContentType: "application/octet-stream") {
      reported.append($0)
    }
    #expect(file.size == Int64(size))
    #expect(file.filename == "source.bin")
    #expect(file.sha256 == sha256Hex(bytes))
    #expect(reported.last == Int64(size))
    #expect(reported.count == (size + (1 << 20) - 1) >> 20)
    let back = try larder.files.data(of: file, maxSize: Int64(size))
    #expect(back.count == size)
    #expect(back == Data(bytes))
    #expect(larder.storeTempFiles() == [])
  }

  /// 200 MiB streamed in and out, compared chunk by chunk against a regenerated stream, never held whole.
  @Test func twoHundredMebibytesRoundTripExactly() throws {
    let larder = try TestStore.temporary()
    let chunk = 1 << 20
    let chunks = 200
    var buffer = [UInt8](repeating: 0, count: chunk)
    var generator = PseudoRandomBytes(seed: 200)
    let writtenDigest = Digest(.sha256)
    let writer = try larder.files.makeWriter()
    for _ in 0..<chunks {
      try buffer.withUnsafeMutableBytes { raw in
        generator.fill(raw)
        writtenDigest.update(UnsafeRawBufferPointer(raw))
        try writer.write(UnsafeRawBufferPointer(raw))
      }
    }
    #expect(writer.byteCount == Int64(chunk * chunks))
    let file = try larder.files.commit(try writer.finish(), filename: "big.bin")
    let written = Hex.encode(writtenDigest.finalize())
    #expect(file.size == Int64(chunk * chunks))
    #expect(file.sha256 == written)

    let reader = try larder.files.open(file)
    #expect(reader.size == Int64(chunk * chunks))
    var expected = PseudoRandomBytes(seed: 200)
    let readDigest = Digest(.sha256)
    var mismatchedChunks = 0
    var readBytes = 0
    try reader.forEachChunk(chunkSize: chunk) { got in
      readDigest.update(got)
      buffer.withUnsafeMutableBytes { want in
        let slice = UnsafeMutableRawBufferPointer(rebasing: want[0..<got.count])
        expected.fill(slice)
        if memcmp(slice.baseAddress!, got.baseAddress!, got.count) != 0 { mismatchedChunks += 1 }
      }
      readBytes += got.count
    }
    #expect(readBytes == chunk * chunks)
    #expect(mismatchedChunks == 0)
    #expect(Hex.encode(readDigest.finalize()) == written)
    #expect(larder.storeTempFiles() == [])
    #expect(try larder.storeCounts() == [1, 1, 0])
  }
}
