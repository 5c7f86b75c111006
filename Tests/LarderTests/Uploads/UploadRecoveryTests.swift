import Foundation
import Larder
import LarderTestSupport
import Synchronization
import Testing

/// What a long append keeps (checkpoints), what a failed COMMIT undoes, and who may take an
/// upload's lease.
@Suite struct UploadRecoveryTests {
  static let chunk = 16 * 1024

  private func open(_ scratch: UploadScratch, checkpoints: UploadCheckpoints?, faults: FaultInjector = .none) throws
    -> (Larder, UploadStore)
  {
    let larder = try TestStore.open(at: scratch.url, configuration: .init(faults: faults))
    return (larder, UploadStore(larder: larder, checkpoints: checkpoints))
  }

  private func write(_ append: UploadAppend, _ data: ArraySlice<UInt8>) throws {
    for start in stride(from: data.startIndex, to: data.endIndex, by: Self.chunk) {
      try append.write(Data(data[start..<min(start + Self.chunk, data.endIndex)]))
    }
  }

  @Test func aLongAppendCommitsCheckpointsThatSurviveItsLossButNeverItsLastByte() throws {
    let scratch = try UploadScratch()
    let data = bytes(300_000, seed: 5)
    let id: String
    do {
      let (_, store) = try open(scratch, checkpoints: UploadCheckpoints(bytes: 64 * 1024, interval: .seconds(3600)))
      id = try store.create(bucket: "app", name: "c.bin", owner: "u", length: 300_000).id
      let append = try store.beginAppend(id: id, owner: "u", offset: 0)
      try write(append, data[..<200_000])
      // Every 64 KiB: 3 checkpoints, the last at 196 608; another reader sees it at once.
      #expect(append.committedOffset == 196_608)
      #expect(try store.upload(id: id, owner: "u").offset == 196_608)
      try write(append, data[200_000...])
      // One more 64 KiB later; all bytes are in, but the last one is never a checkpoint: it
      // needs the admission step.
      #expect(try store.upload(id: id, owner: "u").offset == 265_536)
      // Lost without an answer (a crash, or a connection gone with the bytes unkept).
      append.abort(keepReceived: false)
      #expect(scratch.size(id) == 265_536)
    }
    // After a restart the upload resumes from its last checkpoint, digests and all.
    let (larder, store) = try open(scratch, checkpoints: .default)
    #expect(try store.upload(id: id, owner: "u").offset == 265_536)
    guard case .complete(let done) = try append(store, id, owner: "u", at: 265_536, data[265_536...]) else {
      Issue.record("expected completion")
      return
    }
    #expect(done.sha256Hex == hex(data))
    #expect(try larder.files.data(of: try store.publish(done).file) == Data(data))
  }

  @Test func aChecksumGuardedOrUncheckpointedAppendCommitsOnlyAtItsEnd() throws {
    let scratch = try UploadScratch()
    let (_, store) = try open(scratch, checkpoints: UploadCheckpoints(bytes: 16 * 1024, interval: .seconds(3600)))
    let data = bytes(100_000, seed: 6)
    let id = try store.create(bucket: "app", name: "g.bin", owner: nil, length: 200_000).id
    let guarded = try store.beginAppend(
      id: id, owner: nil, offset: 0,
      checksum: UploadChecksum(algorithm: .sha256, digest: Array(repeating: 0, count: 32)))
    try write(guarded, data[...])
    #expect(try store.upload(id: id, owner: nil).offset == 0)
    #expect(throws: UploadError.checksumMismatch(algorithm: "sha256")) { try guarded.finish() }
    #expect(scratch.size(id) == 0)
    // Firebase's chunks (resent whole by the SDK) ask for none.
    let chunk = try store.beginAppend(id: id, owner: nil, offset: 0, checkpoints: false)
    try write(chunk, data[...])
    #expect(try store.upload(id: id, owner: nil).offset == 0)
    chunk.abort(keepReceived: false)
    #expect(scratch.size(id) == 0)
    // With them, a broken-off append keeps its checkpoints and what arrived after them.
    let kept = try store.beginAppend(id: id, owner: nil, offset: 0)
    try write(kept, data[..<50_000])
    #expect(try store.upload(id: id, owner: nil).offset == 49_152)
    kept.abort(keepReceived: true)
    #expect(try store.upload(id: id, owner: nil).offset == 50_000)
  }

  @Test func aFailedCommitUnlinksWhatItLinkedAndTheUploadResumesAtItsLastOffset() throws {
    let scratch = try UploadScratch()
    let failCommit = Mutex(true)
    let (larder, store) = try open(
      scratch, checkpoints: .default, faults: .failingCommit(while: { failCommit.withLock { $0 } }))
    let data = bytes(5000, seed: 13)
    let id = try store.create(bucket: "app", name: "f.bin", owner: nil, length: 5000).id
    try append(store, id, at: 0, data[0..<2000])
    guard case .complete(let done) = try append(store, id, at: 2000, data[2000...]) else {
      Issue.record("expected completion")
      return
    }
    // SQLite's own COMMIT fails (a foreign-key violation deferred to it): not an error thrown
    // inside the transaction, which the write path always cleaned up after.
    #expect(throws: DatabaseError.self) { try store.publish(done) }
    let blobs = scratch.url.appendingPathComponent("blobs").path
    #expect(regularFiles(under: blobs).isEmpty, "the failed commit's link is gone")
    #expect(try store.upload(id: id, owner: nil).offset == 2000)
    #expect(throws: LarderError.self) { try larder.objects.get(bucket: "app", name: "f.bin") }
    failCommit.withLock { $0 = false }
    // Not 410: the upload is resumable, from its last acknowledged offset.
    guard case .complete(let again) = try append(store, id, at: 2000, data[2000...]) else {
      Issue.record("expected completion")
      return
    }
    let object = try store.publish(again)
    #expect(try larder.files.data(of: object.file) == Data(data))
    #expect(regularFiles(under: blobs).count == 1)
    #expect(scratch.size(id) == nil)
  }

  @Test func aStrangerNeverTakesTheOwnersLease() throws {
    let scratch = try UploadScratch()
    let (_, store) = try open(scratch, checkpoints: .default)
    let id = try store.create(bucket: "app", name: "o.bin", owner: "owner", length: 10).id
    try append(store, id, owner: "owner", at: 0, bytes(4)[...])
    #expect(store.hotSessionCount == 1)
    let stop = StopFlag()
    let strangers = (0..<2).map { _ in
      Thread {
        while !stop.value.withLock({ $0 }) {
          _ = try? store.beginAppend(id: id, owner: "stranger", offset: 4)
          _ = try? store.concatenate(bucket: "app", name: "x", owner: "stranger", metadata: [:], partials: [id])
        }
      }
    }
    for thread in strangers { thread.start() }
    defer { stop.value.withLock { $0 = true } }
    // Strangers hammering the upload never hold its lease: the owner is never told 423.
    for round in 0..<200 {
      let append = try store.beginAppend(id: id, owner: "owner", offset: 4)
      #expect(append.upload.offset == 4, "round \(round)")
      append.abort(keepReceived: false)
    }
    #expect(throws: UploadError.notFound(id: id)) { try store.beginAppend(id: id, owner: "stranger", offset: 4) }
    // Nor do they drop its hot session.
    #expect(store.hotSessionCount == 1)
  }
}

private func regularFiles(under path: String) -> [String] {
  guard let walker = FileManager.default.enumerator(atPath: path) else { return [] }
  var files: [String] = []
  while let item = walker.nextObject() as? String {
    var isDirectory: ObjCBool = false
    if FileManager.default.fileExists(atPath: "\(path)/\(item)", isDirectory: &isDirectory), !isDirectory.boolValue {
      files.append(item)
    }
  }
  return files
}

private final class StopFlag: Sendable {
  let value = Mutex(false)
}
