import Foundation
import LarderTestSupport
import Larder
import LarderCrypto
import Testing

/// A write that fails or is cancelled at any point leaves no row, no temp file and no blob file.
@Suite struct WriteFailureTests {
  private func expectNothingStored(_ larder: Larder, sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(try larder.storeCounts() == [0, 0, 0], sourceLocation: sourceLocation)
    #expect(larder.storeTempFiles() == [], sourceLocation: sourceLocation)
    #expect(larder.storeBlobFiles() == [], sourceLocation: sourceLocation)
  }

  @Test func sizeLimitExceededStoresNothing() throws {
    let larder = try TestStore.temporary()
    let error = #expect(throws: LarderError.self) {
      try larder.objects.put(bucket: "b", name: "big", data: Data(count: 11), sizeLimit: 10)
    }
    #expect(error == .sizeLimitExceeded(limit: 10))
    try expectNothingStored(larder)
    // Exactly at the limit is allowed.
    let object = try larder.objects.put(bucket: "b", name: "ok", data: Data(count: 10), sizeLimit: 10)
    #expect(object.file.size == 10)
    #expect(try larder.storeCounts() == [1, 1, 1])
  }

  @Test func sizeLimitExceededWhileStreamingStoresNothing() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url.appendingPathComponent("data"))
    var random = PseudoRandomBytes(seed: 9)
    let source = try scratch.file("source.bin", random.bytes((1 << 20) + 1))
    var progress: [Int64] = []
    let error = #expect(throws: LarderError.self) {
      try larder.files.put(contentsOf: source, options: .init(sizeLimit: 1 << 20)) { progress.append($0) }
    }
    #expect(error == .sizeLimitExceeded(limit: 1 << 20))
    #expect(progress == [1 << 20])
    try expectNothingStored(larder)
  }

  @Test func expectedDigestMismatchStoresNothing() throws {
    let larder = try TestStore.temporary()
    let bytes = Data("checked content".utf8)
    let real = Digest.hash(.sha256, bytes)
    var wrong = real
    wrong[0] ^= 0x01
    let error = #expect(throws: LarderError.self) {
      try larder.files.put(bytes, options: .init(expectedSHA256: wrong))
    }
    #expect(error == .checksumMismatch(algorithm: "sha256", expected: Hex.encode(wrong), actual: Hex.encode(real)))
    try expectNothingStored(larder)

    let realMD5 = Digest.hash(.md5, bytes)
    let md5Error = #expect(throws: LarderError.self) {
      try larder.files.put(bytes, options: .init(expectedMD5: [UInt8](repeating: 0, count: 16)))
    }
    #expect(
      md5Error
        == .checksumMismatch(
          algorithm: "md5", expected: String(repeating: "0", count: 32), actual: Hex.encode(realMD5)))
    try expectNothingStored(larder)

    let file = try larder.files.put(bytes, options: .init(expectedSHA256: real, expectedMD5: realMD5))
    #expect(file.sha256 == Hex.encode(real))
  }

  @Test func cancelledWriterLeavesNoTempFile() throws {
    let larder = try TestStore.temporary()
    let writer = try larder.files.makeWriter()
    try writer.write(Data(count: 300_000))
    #expect(larder.storeTempFiles().count == 1)
    writer.cancel()
    writer.cancel()  // idempotent
    try expectNothingStored(larder)
  }

  @Test func writerReleasedWithoutFinishLeavesNoTempFile() throws {
    let larder = try TestStore.temporary()
    func writeHalf() throws -> Int {
      let writer = try larder.files.makeWriter()
      try writer.write(Data(count: 300_000))
      return larder.storeTempFiles().count
    }
    #expect(try writeHalf() == 1)
    try expectNothingStored(larder)
  }

  @Test func stagedBlobDiscardedWithoutCommitLeavesNothing() throws {
    let larder = try TestStore.temporary()
    func stageOnly() throws -> Int {
      let writer = try larder.files.makeWriter()
      try writer.write(Data("staged".utf8))
      let staged = try writer.finish()
      return staged.size == 6 ? larder.storeTempFiles().count : -1
    }
    #expect(try stageOnly() == 1)
    try expectNothingStored(larder)
  }

  /// The asynchronous put maps task cancellation to ``LarderError/cancelled`` and cleans up.
  @Test func cancelledAsyncPutStoresNothing() async throws {
    let larder = try TestStore.temporary()
    // An unstructured task, so that cancelling it does not cancel the test itself.
    let upload = Task { try await larder.files.put(SelfCancellingChunks(cancelAfter: 2), filename: "cancelled.bin") }
    let result = await upload.result
    guard case .failure(let error) = result else {
      Issue.record("the cancelled put succeeded")
      return
    }
    #expect(error as? LarderError == .cancelled)
    try expectNothingStored(larder)
  }

  @Test func failingChunkSourceStoresNothing() async throws {
    let larder = try TestStore.temporary()
    let chunks = AsyncThrowingStream<Data, any Error> { continuation in
      continuation.yield(Data(count: 1000))
      continuation.yield(Data(count: 1000))
      continuation.finish(throwing: InjectedFailure())
    }
    await #expect(throws: InjectedFailure.self) {
      try await larder.files.put(chunks)
    }
    try expectNothingStored(larder)
  }

  @Test(arguments: [FaultPoint.afterStage, .afterLink, .beforeCommit])
  func failureBeforeCommitStoresNothing(point: FaultPoint) throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let faulty = try TestStore.open(
      at: directory,
      configuration: .init(faults: FaultInjector { if $0 == point { throw InjectedFailure() } }))
    let bytes = Data("content that must not appear \(point.rawValue)".utf8)
    #expect(throws: InjectedFailure.self) {
      try faulty.objects.put(bucket: "b", name: "doomed.txt", data: bytes)
    }
    try expectNothingStored(faulty)
    #expect(throws: LarderError.notFound(bucket: "b", name: "doomed.txt")) {
      try faulty.objects.get(bucket: "b", name: "doomed.txt")
    }

    // Reopened without faults: recovery finds nothing to do, and the same content stores normally.
    let healthy = try TestStore.open(at: directory)
    #expect(healthy.recovery.tempFilesRemoved == 0)
    #expect(healthy.recovery.trashRestored == 0)
    #expect(healthy.recovery.trashRemoved == 0)
    let object = try healthy.objects.put(bucket: "b", name: "doomed.txt", data: bytes)
    #expect(try healthy.files.data(of: object.file) == bytes)
    #expect(try healthy.storeCounts() == [1, 1, 1])
    #expect(healthy.storeBlobFiles().count == 1)
  }

  /// A failure after linking, for content whose blob already exists, must not remove the existing blob.
  @Test func failureAfterDedupeKeepsTheExistingBlob() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let bytes = Data("shared content".utf8)
    let first = try TestStore.open(at: directory).objects.put(bucket: "b", name: "first", data: bytes)
    let faulty = try TestStore.open(
      at: directory,
      configuration: .init(faults: FaultInjector { if $0 == .beforeCommit { throw InjectedFailure() } }))
    #expect(throws: InjectedFailure.self) {
      try faulty.objects.put(bucket: "b", name: "second", data: bytes)
    }
    #expect(try faulty.storeCounts() == [1, 1, 1])
    #expect(faulty.storeBlobFiles().count == 1)
    #expect(try faulty.files.data(of: first.file) == bytes)
  }

  /// A failure after commit happens when the write is already durable: the object is there.
  @Test func failureAfterCommitLeavesTheCommittedObject() throws {
    let larder = try TestStore.temporary(
      configuration: .init(faults: FaultInjector { if $0 == .afterCommit { throw InjectedFailure() } }))
    #expect(throws: InjectedFailure.self) {
      try larder.objects.put(bucket: "b", name: "kept", data: Data("kept".utf8))
    }
    #expect(try larder.storeCounts() == [1, 1, 1])
    #expect(larder.storeTempFiles() == [])
    #expect(try larder.files.data(of: try larder.objects.get(bucket: "b", name: "kept").file) == Data("kept".utf8))
  }
}

/// Chunks that cancel the task consuming them after `cancelAfter` chunks.
struct SelfCancellingChunks: AsyncSequence {
  typealias Element = Data
  let cancelAfter: Int

  struct AsyncIterator: AsyncIteratorProtocol {
    var produced = 0
    let cancelAfter: Int
    mutating func next() async -> Data? {
      produced += 1
      if produced > cancelAfter { withUnsafeCurrentTask { $0?.cancel() } }
      return produced > 10 ? nil : Data(repeating: UInt8(produced), count: 100_000)
    }
  }

  func makeAsyncIterator() -> AsyncIterator { AsyncIterator(cancelAfter: cancelAfter) }
}
