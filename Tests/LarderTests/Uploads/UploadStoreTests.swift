import Foundation
import LarderTestSupport
import Larder
import LarderCrypto
import Synchronization
import Testing

/// A data directory that outlives one `Larder`, so a test can "restart" on it.
final class UploadScratch: Sendable {
  let url: URL
  init() throws {
    url = FileManager.default.temporaryDirectory.appendingPathComponent("larder-uploads-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }
  deinit { try? FileManager.default.removeItem(at: url) }
  func open(faults: FaultInjector = .none) throws -> (Larder, UploadStore) {
    let larder = try TestStore.open(at: url, configuration: .init(faults: faults))
    return (larder, UploadStore(larder: larder))
  }
  func uploadPath(_ id: String) -> String { url.appendingPathComponent("uploads/\(id)").path }
  func size(_ id: String) -> Int64? {
    (try? FileManager.default.attributesOfItem(atPath: uploadPath(id))[.size] as? NSNumber)?.int64Value
  }
}

func bytes(_ count: Int, seed: Int = 1) -> [UInt8] {
  (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 131) ^ ($0 >> 7) &+ seed) }
}

func hex(_ b: [UInt8]) -> String { Hex.encode(Digest.hash(.sha256, b)) }

@discardableResult
func append(
  _ store: UploadStore, _ id: String, owner: String? = nil, at offset: Int, _ data: ArraySlice<UInt8>,
  length: Int64? = nil, checksum: UploadChecksum? = nil
) throws -> UploadAppendOutcome {
  let a = try store.beginAppend(
    id: id, owner: owner, offset: Int64(offset), length: length, checksum: checksum)
  try a.write(Data(data))
  return try a.finish()
}

@Suite struct UploadStoreTests {
  @Test func appendsCommitThenTheLastPublishesAndCompletesTheRow() throws {
    let scratch = try UploadScratch()
    let (larder, store) = try scratch.open()
    let data = bytes(10_000)
    let upload = try store.create(
      bucket: "app", name: "docs/a.bin", owner: "u1", length: 10_000,
      metadata: ["name": "docs/a.bin", "filename": "a.bin", "k": "v"])
    #expect(upload.offset == 0 && upload.length == 10_000 && upload.completedAt == nil)
    guard case .progress(let mid) = try append(store, upload.id, owner: "u1", at: 0, data[0..<4000]) else {
      Issue.record("expected progress")
      return
    }
    #expect(mid.offset == 4000)
    #expect(try store.upload(id: upload.id, owner: "u1").offset == 4000)
    #expect(store.hotSessionCount == 1)
    guard case .complete(let done) = try append(store, upload.id, owner: "u1", at: 4000, data[4000...]) else {
      Issue.record("expected completion")
      return
    }
    #expect(done.size == 10_000)
    #expect(done.sha256Hex == hex(data))
    // Not visible until published.
    #expect(throws: LarderError.self) { try larder.objects.get(bucket: "app", name: "docs/a.bin") }
    #expect(try store.upload(id: upload.id, owner: "u1").offset == 4000)
    let object = try store.publish(done)
    #expect(object.file.sha256 == hex(data))
    #expect(object.metadata == ["k": "v"])
    #expect(object.file.filename == "a.bin")
    #expect(try larder.files.data(of: object.file) == Data(data))
    let row = try store.upload(id: upload.id, owner: "u1")
    #expect(row.offset == 10_000 && row.completedAt != nil)
    #expect(scratch.size(upload.id) == nil)
    #expect(store.hotSessionCount == 0)
    #expect(throws: UploadError.exceedsLength(length: 10_000)) {
      try store.beginAppend(id: upload.id, owner: "u1", offset: 10_000)
    }
  }

  @Test func resumeAfterACrashTruncatesToTheOffsetAndHashesTheFileOnceAtTheEnd() throws {
    let scratch = try UploadScratch()
    let data = bytes(300_000, seed: 3)
    let id: String
    do {
      let (_, store) = try scratch.open()
      id = try store.create(bucket: "app", name: "v.bin", owner: nil, length: 300_000).id
      try append(store, id, at: 0, data[0..<120_000])
    }
    // The crash: unacknowledged bytes past the offset, and the file left read-only by staging.
    let handle = try #require(FileHandle(forWritingAtPath: scratch.uploadPath(id)))
    handle.seekToEndOfFile()
    handle.write(Data(repeating: 0xEE, count: 5000))
    try handle.close()
    chmod(scratch.uploadPath(id), 0o444)
    let (larder, store) = try scratch.open()
    #expect(try store.upload(id: id, owner: nil).offset == 120_000)
    let a = try store.beginAppend(id: id, owner: nil, offset: 120_000)
    #expect(scratch.size(id) == 120_000)
    try a.write(Data(data[120_000...]))
    guard case .complete(let done) = try a.finish() else {
      Issue.record("expected completion")
      return
    }
    #expect(done.sha256Hex == hex(data))
    #expect(Hex.encode(done.md5) == Hex.encode(Digest.hash(.md5, data)))
    let object = try store.publish(done)
    #expect(try larder.files.data(of: object.file) == Data(data))
  }

  @Test func checksumMismatchDiscardsTheChunkAndKeepsTheDigestsClean() throws {
    let scratch = try UploadScratch()
    let (larder, store) = try scratch.open()
    let data = bytes(3000, seed: 5)
    let id = try store.create(bucket: "app", name: "c.bin", owner: nil, length: 3000).id
    try append(store, id, at: 0, data[0..<1000])
    let wrong = UploadChecksum(algorithm: .sha1, digest: Digest.hash(.sha1, [1, 2, 3]))
    #expect(throws: UploadError.checksumMismatch(algorithm: "sha1")) {
      try append(store, id, at: 1000, data[1000..<2000], checksum: wrong)
    }
    #expect(try store.upload(id: id, owner: nil).offset == 1000)
    let right = UploadChecksum(algorithm: .md5, digest: Digest.hash(.md5, Array(data[1000..<2000])))
    try append(store, id, at: 1000, data[1000..<2000], checksum: right)
    guard case .complete(let done) = try append(store, id, at: 2000, data[2000...]) else {
      Issue.record("expected completion")
      return
    }
    #expect(done.sha256Hex == hex(data))
    #expect(try larder.files.data(of: try store.publish(done).file) == Data(data))
  }

  @Test func oneWriterAtATime() throws {
    let scratch = try UploadScratch()
    let (_, store) = try scratch.open()
    let id = try store.create(bucket: "app", name: "l.bin", owner: nil, length: 100).id
    let first = try store.beginAppend(id: id, owner: nil, offset: 0)
    try first.write(Data([1, 2, 3]))
    #expect(throws: UploadError.locked(id: id)) { try store.beginAppend(id: id, owner: nil, offset: 0) }
    #expect(throws: UploadError.locked(id: id)) { try store.terminate(id: id, owner: nil) }
    _ = try first.finish()
    #expect(try store.upload(id: id, owner: nil).offset == 3)
    try append(store, id, at: 3, [4][...])
    #expect(try store.upload(id: id, owner: nil).offset == 4)
  }

  @Test func anAbortedAppendKeepsWhatArrivedUnlessAChecksumGuardsIt() throws {
    let scratch = try UploadScratch()
    let (_, store) = try scratch.open()
    let id = try store.create(bucket: "app", name: "a.bin", owner: nil, length: 100).id
    let a = try store.beginAppend(id: id, owner: nil, offset: 0)
    try a.write(Data(bytes(30)))
    a.abort(keepReceived: true)
    #expect(try store.upload(id: id, owner: nil).offset == 30)
    let guarded = try store.beginAppend(
      id: id, owner: nil, offset: 30,
      checksum: UploadChecksum(algorithm: .sha256, digest: Digest.hash(.sha256, [9])))
    try guarded.write(Data(bytes(20)))
    guarded.abort(keepReceived: true)
    #expect(try store.upload(id: id, owner: nil).offset == 30)
    #expect(scratch.size(id) == 30)
    // Bytes that would complete the upload are not kept (the policy must see them first).
    let last = try store.beginAppend(id: id, owner: nil, offset: 30)
    try last.write(Data(bytes(70)))
    last.abort(keepReceived: true)
    #expect(try store.upload(id: id, owner: nil).offset == 30)
    // Writing past the length ends the append with nothing kept.
    let over = try store.beginAppend(id: id, owner: nil, offset: 30)
    #expect(throws: UploadError.exceedsLength(length: 100)) { try over.write(Data(bytes(71))) }
    #expect(try store.upload(id: id, owner: nil).offset == 30)
    #expect(scratch.size(id) == 30)
  }

  @Test func anUnsettledOrFailedCompletionRollsBackToTheLastAcknowledgedOffset() throws {
    let scratch = try UploadScratch()
    let failNext = Mutex(true)
    struct Injected: Error {}
    let (larder, store) = try scratch.open(
      faults: FaultInjector { point in
        if point == .beforeCommit,
          failNext.withLock({
            let f = $0
            $0 = false
            return f
          })
        {
          throw Injected()
        }
      })
    let data = bytes(5000, seed: 9)
    let id = try store.create(bucket: "app", name: "r.bin", owner: nil, length: 5000).id
    try append(store, id, at: 0, data[0..<2000])
    do {
      guard case .complete = try append(store, id, at: 2000, data[2000...]) else {
        Issue.record("expected completion")
        return
      }
      // Dropped without publish or reject.
    }
    #expect(try store.upload(id: id, owner: nil).offset == 2000)
    // The file is not touched by the rollback (it could be linked into blobs/); the next load
    // truncates it.
    #expect(scratch.size(id) == 5000)
    guard case .complete(let again) = try append(store, id, at: 2000, data[2000...]) else {
      Issue.record("expected completion")
      return
    }
    #expect(throws: Injected.self) { try store.publish(again) }
    #expect(try store.upload(id: id, owner: nil).offset == 2000)
    #expect(try store.upload(id: id, owner: nil).completedAt == nil)
    #expect(throws: LarderError.self) { try larder.objects.get(bucket: "app", name: "r.bin") }
    guard case .complete(let third) = try append(store, id, at: 2000, data[2000...]) else {
      Issue.record("expected completion")
      return
    }
    #expect(try larder.files.data(of: try store.publish(third).file) == Data(data))
  }

  @Test func aFailureAfterThePublishCommitNeverTruncatesTheLinkedBlob() throws {
    let scratch = try UploadScratch()
    let failNext = Mutex(true)
    struct Injected: Error {}
    let (larder, store) = try scratch.open(
      faults: FaultInjector { point in
        if point == .afterCommit, failNext.withLock({ $0 }) {
          failNext.withLock { $0 = false }
          throw Injected()
        }
      })
    let data = bytes(5000, seed: 11)
    let id = try store.create(bucket: "app", name: "l.bin", owner: nil, length: 5000).id
    try append(store, id, at: 0, data[0..<2000])
    guard case .complete(let done) = try append(store, id, at: 2000, data[2000...]) else {
      Issue.record("expected completion")
      return
    }
    #expect(throws: Injected.self) { try store.publish(done) }
    // The commit went through: the object is whole and the upload is completed.
    let object = try larder.objects.get(bucket: "app", name: "l.bin")
    #expect(try larder.files.data(of: object.file) == Data(data))
    #expect(try store.upload(id: id, owner: nil).completedAt != nil)
    #expect(store.hotSessionCount == 0)
    #expect(throws: UploadError.exceedsLength(length: 5000)) {
      try store.beginAppend(id: id, owner: nil, offset: 5000)
    }
    #expect(try larder.files.data(of: object.file) == Data(data))
  }

  @Test func aFileLinkedElsewhereIsNeverTruncatedNorAppendedTo() throws {
    let scratch = try UploadScratch()
    let id: String
    do {
      let (_, store) = try scratch.open()
      id = try store.create(bucket: "app", name: "h.bin", owner: nil, length: 9000).id
      try append(store, id, at: 0, bytes(2000)[...])
    }
    // An unacknowledged tail, and a second name for the file (as a published blob has).
    let handle = try #require(FileHandle(forWritingAtPath: scratch.uploadPath(id)))
    handle.seekToEndOfFile()
    handle.write(Data(repeating: 0xEE, count: 1000))
    try handle.close()
    let other = scratch.url.appendingPathComponent("linked").path
    #expect(link(scratch.uploadPath(id), other) == 0)
    let (_, store) = try scratch.open()
    #expect(throws: UploadError.dataLost(id: id)) { try store.beginAppend(id: id, owner: nil, offset: 2000) }
    #expect(scratch.size(id) == 3000)
    var st = stat()
    #expect(stat(other, &st) == 0 && st.st_mode & 0o777 == 0o600)
  }

  @Test func aColdSessionHashesTheWholeFileOnceAtCompletion() throws {
    let scratch = try UploadScratch()
    let data = bytes(3 << 20, seed: 4)
    let id: String
    do {
      let (_, store) = try scratch.open()
      id = try store.create(bucket: "app", name: "cold.bin", owner: nil, length: Int64(data.count)).id
      try append(store, id, at: 0, data[0..<(1 << 20) + 7])
    }
    // Two cold resumes (a new store each time), one with a chunk crossing several blocks.
    do {
      let (_, store) = try scratch.open()
      #expect(store.hotSessionCount == 0)
      try append(store, id, at: (1 << 20) + 7, data[((1 << 20) + 7)..<((5 << 19) + 3)])
      #expect(store.hotSessionCount == 1)
    }
    let (larder, store) = try scratch.open()
    let a = try store.beginAppend(id: id, owner: nil, offset: (5 << 19) + 3)
    for start in stride(from: (5 << 19) + 3, to: data.count, by: 8191) {
      try a.write(Data(data[start..<min(start + 8191, data.count)]))
    }
    guard case .complete(let done) = try a.finish() else {
      Issue.record("expected completion")
      return
    }
    #expect(done.size == Int64(data.count))
    #expect(done.sha256Hex == hex(data))
    #expect(Hex.encode(done.md5) == Hex.encode(Digest.hash(.md5, data)))
    #expect(try larder.files.data(of: try store.publish(done).file) == Data(data))
  }

  @Test func aWarmSessionBuffersSmallChunksAndKeepsExactDigests() throws {
    let scratch = try UploadScratch()
    let (larder, store) = try scratch.open()
    let data = bytes((2 << 20) + 12345, seed: 8)
    let id = try store.create(bucket: "app", name: "warm.bin", owner: nil, length: Int64(data.count)).id
    var offset = 0
    // Chunks of ~0.7 MiB sent in 1000-byte writes, each with a checksum of the whole chunk.
    while offset < data.count {
      let end = min(offset + 700_000, data.count)
      let chunk = Array(data[offset..<end])
      let a = try store.beginAppend(
        id: id, owner: nil, offset: Int64(offset),
        checksum: UploadChecksum(algorithm: .sha1, digest: Digest.hash(.sha1, chunk)))
      for s in stride(from: 0, to: chunk.count, by: 1000) {
        try a.write(Data(chunk[s..<min(s + 1000, chunk.count)]))
      }
      switch try a.finish() {
      case .progress(let u):
        #expect(u.offset == Int64(end))
        #expect(scratch.size(id) == Int64(end))
      case .complete(let done):
        #expect(end == data.count)
        #expect(done.sha256Hex == hex(data))
        #expect(Hex.encode(done.md5) == Hex.encode(Digest.hash(.md5, data)))
        #expect(try larder.files.data(of: try store.publish(done).file) == Data(data))
      }
      offset = end
    }
  }

  @Test func rejectDeletesTheUploadAndItsBytes() throws {
    let scratch = try UploadScratch()
    let (_, store) = try scratch.open()
    let id = try store.create(bucket: "app", name: "x.bin", owner: "u", length: 3).id
    guard case .complete(let done) = try append(store, id, owner: "u", at: 0, [1, 2, 3][...]) else {
      Issue.record("expected completion")
      return
    }
    store.reject(done)
    #expect(throws: UploadError.notFound(id: id)) { try store.upload(id: id, owner: "u") }
    #expect(scratch.size(id) == nil)
  }

  @Test func uploadsAreOnlyVisibleToTheirOwner() throws {
    let scratch = try UploadScratch()
    let (_, store) = try scratch.open()
    let owned = try store.create(bucket: "app", name: "o", owner: "alice", length: 1).id
    let anonymous = try store.create(bucket: "app", name: "p", owner: nil, length: 1).id
    #expect(throws: UploadError.notFound(id: owned)) { try store.upload(id: owned, owner: "bob") }
    #expect(throws: UploadError.notFound(id: owned)) { try store.upload(id: owned, owner: nil) }
    #expect(throws: UploadError.notFound(id: anonymous)) { try store.upload(id: anonymous, owner: "alice") }
    #expect(throws: UploadError.notFound(id: owned)) { try store.terminate(id: owned, owner: "bob") }
    #expect(throws: UploadError.notFound(id: owned)) {
      try store.beginAppend(id: owned, owner: nil, offset: 0)
    }
    #expect(try store.upload(id: owned, owner: "alice").owner == "alice")
    #expect(throws: UploadError.notFound(id: "../larder.sqlite")) {
      try store.upload(id: "../larder.sqlite", owner: nil)
    }
  }

  @Test func missingBytesAreReportedAsLost() throws {
    let scratch = try UploadScratch()
    let id: String
    do {
      let (_, store) = try scratch.open()
      id = try store.create(bucket: "app", name: "m", owner: nil, length: 100).id
      try append(store, id, at: 0, bytes(50)[...])
    }
    truncate(scratch.uploadPath(id), 10)
    let (_, store) = try scratch.open()
    #expect(throws: UploadError.dataLost(id: id)) { try store.beginAppend(id: id, owner: nil, offset: 50) }
    #expect(throws: UploadError.offsetMismatch(expected: 50, actual: 10)) {
      try store.beginAppend(id: id, owner: nil, offset: 10)
    }
  }

  @Test func aSizeLimitBoundsADeferredUpload() throws {
    let scratch = try UploadScratch()
    let (_, store) = try scratch.open()
    let id = try store.create(bucket: "app", name: "s", owner: nil, length: nil).id
    let a = try store.beginAppend(id: id, owner: nil, offset: 0, sizeLimit: 100)
    try a.write(Data(bytes(60)))
    #expect(throws: LarderError.sizeLimitExceeded(limit: 100)) { try a.write(Data(bytes(41))) }
    #expect(try store.upload(id: id, owner: nil).offset == 0)
    #expect(scratch.size(id) == 0)
  }

  @Test func deferredLengthIsSetOnceAndChecked() throws {
    let scratch = try UploadScratch()
    let (_, store) = try scratch.open()
    let id = try store.create(bucket: "app", name: "d", owner: nil, length: nil).id
    #expect(try store.upload(id: id, owner: nil).length == nil)
    try append(store, id, at: 0, bytes(10)[...])
    #expect(throws: UploadError.invalidLength("Upload-Length 5 is smaller than the offset 10")) {
      try store.beginAppend(id: id, owner: nil, offset: 10, length: 5)
    }
    try append(store, id, at: 10, bytes(20)[10..<15], length: 20)
    #expect(try store.upload(id: id, owner: nil).length == 20)
    #expect(throws: UploadError.invalidLength("Upload-Length is already 20 and cannot change")) {
      try store.beginAppend(id: id, owner: nil, offset: 15, length: 21)
    }
    guard case .complete = try append(store, id, at: 15, bytes(20)[15...], length: 20) else {
      Issue.record("expected completion")
      return
    }
  }

  @Test func creationValidatesNamesAndMetadata() throws {
    let scratch = try UploadScratch()
    let (_, store) = try scratch.open()
    #expect(throws: LarderError.self) { try store.create(bucket: "app", name: nil, owner: nil, length: 1) }
    #expect(throws: LarderError.self) { try store.create(bucket: "app", name: "", owner: nil, length: 1) }
    #expect(throws: LarderError.self) {
      try store.create(bucket: "Bad Bucket!", name: "a", owner: nil, length: 1)
    }
    #expect(throws: LarderError.self) { try store.create(bucket: "app", name: "a", owner: nil, length: -1) }
    #expect(throws: LarderError.self) {
      try store.create(
        bucket: "app", name: "a", owner: nil, length: 1,
        metadata: ["big": String(repeating: "x", count: 9000)])
    }
    #expect(
      try FileManager.default.contentsOfDirectory(atPath: scratch.url.appendingPathComponent("uploads").path)
        .isEmpty)
    let partial = try store.create(bucket: "app", name: nil, owner: nil, length: 1, partial: true)
    #expect(partial.isPartial && partial.name == nil)
  }

  @Test func concatenationJoinsFinishedPartialsInOrder() throws {
    let scratch = try UploadScratch()
    let (larder, store) = try scratch.open()
    let a = bytes(70_000, seed: 1)
    let b = bytes(1_000, seed: 2)
    let pa = try store.create(bucket: "app", name: nil, owner: "u", length: 70_000, partial: true).id
    let pb = try store.create(bucket: "app", name: nil, owner: "u", length: 1_000, partial: true).id
    try append(store, pa, owner: "u", at: 0, a[...])
    #expect(throws: UploadError.self) {
      try store.concatenate(bucket: "app", name: "j", owner: "u", metadata: [:], partials: [pa, pb])
    }
    guard case .progress(let done) = try append(store, pb, owner: "u", at: 0, b[...]) else {
      Issue.record("a finished partial is not published")
      return
    }
    #expect(done.isComplete)
    #expect(throws: UploadError.self) {
      try store.concatenate(bucket: "app", name: "j", owner: "other", metadata: [:], partials: [pa, pb])
    }
    #expect(throws: LarderError.sizeLimitExceeded(limit: 1000)) {
      try store.concatenate(
        bucket: "app", name: "j", owner: "u", metadata: [:], partials: [pa, pb], sizeLimit: 1000)
    }
    let final = try store.concatenate(
      bucket: "app", name: "j", owner: "u", metadata: ["name": "j"], partials: [pb, pa, pb])
    #expect(final.size == 72_000)
    #expect(final.sha256Hex == hex(b + a + b))
    let object = try store.publish(final)
    #expect(try larder.files.data(of: object.file) == Data(b + a + b))
    let row = try store.upload(id: final.upload.id, owner: "u")
    #expect(row.concat == .final([pb, pa, pb]))
    #expect(row.offset == 72_000 && row.length == 72_000)
    #expect(throws: UploadError.finalNotAppendable(id: row.id)) {
      try store.beginAppend(id: row.id, owner: "u", offset: 72_000)
    }
    #expect(try larder.objects.list(bucket: "app").items.map(\.name) == ["j"])
  }

  @Test func concatenationAuthorizesTheTotalUnderTheLeasesAndReportsLostBytes() throws {
    let scratch = try UploadScratch()
    let (_, store) = try scratch.open()
    let pa = try store.create(bucket: "app", name: nil, owner: "u", length: 300, partial: true).id
    let pb = try store.create(bucket: "app", name: nil, owner: "u", length: 20, partial: true).id
    try append(store, pa, owner: "u", at: 0, bytes(300)[...])
    try append(store, pb, owner: "u", at: 0, bytes(20)[...])
    struct Denied: Error {}
    let asked = Mutex<[Int64]>([])
    #expect(throws: Denied.self) {
      try store.concatenate(bucket: "app", name: "k", owner: "u", metadata: [:], partials: [pa, pb, pa]) {
        size in
        asked.withLock { $0.append(size) }
        // The partials are held: nobody can terminate one meanwhile.
        #expect(throws: UploadError.locked(id: pb)) { try store.terminate(id: pb, owner: "u") }
        throw Denied()
      }
    }
    #expect(asked.withLock { $0 } == [620])
    // Leases are released after a refusal.
    #expect(store.hotSessionCount == 0)
    unlink(scratch.uploadPath(pb))
    #expect(throws: UploadError.dataLost(id: pb)) {
      try store.concatenate(bucket: "app", name: "k", owner: "u", metadata: [:], partials: [pa, pb])
    }
    try store.terminate(id: pa, owner: "u")
  }

  @Test func terminationRemovesRowAndBytes() throws {
    let scratch = try UploadScratch()
    let (_, store) = try scratch.open()
    let id = try store.create(bucket: "app", name: "t", owner: "u", length: 10).id
    try append(store, id, owner: "u", at: 0, bytes(4)[...])
    try store.terminate(id: id, owner: "u")
    #expect(scratch.size(id) == nil)
    #expect(store.hotSessionCount == 0)
    #expect(throws: UploadError.notFound(id: id)) { try store.upload(id: id, owner: "u") }
  }
}
