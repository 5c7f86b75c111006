import Foundation
import Larder
import LarderTestSupport
import Testing

/// An append begins from the row its request read (one read per request). Proves that a row
/// another append of this process moved since is never trusted: the store reads it again under
/// the lease, so a client at the old offset gets the offset mismatch and no acknowledged byte is
/// cut off (a session loaded at the stale offset would truncate the staging file to it).
struct StaleUploadReadTests {
  @Test(arguments: [0, 64])
  func anAppendFromAStaleReadReadsTheRowAgainAndKeepsEveryAcknowledgedByte(idleSessions: Int) throws {
    let scratch = try UploadScratch()
    let larder = try TestStore.open(at: scratch.url)
    // 0 idle sessions: no hot session is left to say where the file ends.
    let store = UploadStore(larder: larder, maxIdleSessions: idleSessions)
    let content = bytes(10_000, seed: 3)
    let upload = try store.create(bucket: "app", name: "stale.bin", owner: "u", length: 10_000)
    let stale = try store.upload(id: upload.id, owner: "u")
    #expect(stale.offset == 0)
    // Another request reads the row after this one and appends 4,000 bytes.
    let other = try store.beginAppend(try store.upload(id: upload.id, owner: "u"), owner: "u", offset: 0)
    try other.write(Data(content[0..<4000]))
    guard case .progress(let moved) = try other.finish() else { throw HarnessFailure("completed early") }
    #expect(moved.offset == 4000)

    #expect(throws: UploadError.offsetMismatch(expected: 4000, actual: 0)) {
      _ = try store.beginAppend(stale, owner: "u", offset: 0)
    }
    #expect(scratch.size(upload.id) == 4000)
    let rest = try store.beginAppend(stale, owner: "u", offset: 4000)
    try rest.write(Data(content[4000...]))
    guard case .complete(let done) = try rest.finish() else { throw HarnessFailure("not complete") }
    let object = try store.publish(done)
    #expect([UInt8](try larder.files.data(of: object.file)) == content)
  }
}
