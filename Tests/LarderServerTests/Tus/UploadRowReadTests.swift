import Foundation
import Larder
import LarderServer
import LarderTestSupport
import Synchronization
import Testing

/// What a request costs in reads of its upload's row, counted by a wrapper around the real
/// `uploads` statements injected through the upload store's `init` (no global). Each resumable
/// protocol reads the row once per request, to judge it (owner, bucket, offset, length), and
/// hands that row down to the append: taking the lease reads it no more (issue 33: a tus PATCH
/// read it three times before its first byte, a GCS chunk three times).
struct UploadRowReadTests {
  /// An in-process service whose upload store's statements are counted.
  static func counted() throws -> (InProcessService, CountingUploadTable) {
    let table = Mutex<CountingUploadTable?>(nil)
    let s = try InProcessService(uploads: { larder, options in
      let counting = CountingUploadTable(CatalogUploadTable(catalog: larder.catalog))
      table.withLock { $0 = counting }
      return UploadStore(larder: larder, expiry: options.uploadExpiry, lease: options.uploadLease, table: counting)
    })
    return (s, try #require(table.withLock { $0 }))
  }

  @Test func aTusPatchReadsItsUploadRowOnce() throws {
    let (s, table) = try Self.counted()
    defer { s.close() }
    let content = testBytes(300_000, seed: 41)
    let path = try s.create(length: content.count, name: "counted/tus.bin")
    var offset = 0
    for size in [100_000, 150_000, 50_000] {
      table.reset()
      let r = try s.patch(path, offset: offset, Array(content[offset..<offset + size]))
      offset += size
      #expect(r.status == 204)
      #expect(r["Upload-Offset"] == String(offset))
      // The last PATCH publishes the object too: still the one read.
      #expect(table.rowReads == 1, "the PATCH at \(offset - size) read the upload row \(table.rowReads) times")
    }
    #expect(try s.objectBytes("counted/tus.bin").body == content)
  }

  @Test func aGcsResumableChunkReadsItsUploadRowOnce() throws {
    let (s, table) = try Self.counted()
    defer { s.close() }
    let content = testBytes(700_000, seed: 43)
    let start = try s.send(
      WireRequest("POST", "/upload/storage/v1/b/app/o?uploadType=resumable&name=counted%2Fgcs.bin", body: []))
    #expect(start.status == 200)
    let session = try GcsApiTests.sessionPath(start["Location"])
    var first = 0
    for size in [262_144, 262_144, 175_712] {
      let last = first + size - 1
      table.reset()
      let r = try s.send(
        GcsApiTests.put(session, range: "bytes \(first)-\(last)/\(content.count)", body: Array(content[first...last])))
      #expect(r.status == (last + 1 == content.count ? 200 : 308), "\(r.text)")
      #expect(table.rowReads == 1, "the chunk at \(first) read the upload row \(table.rowReads) times")
      first = last + 1
    }
    #expect(try s.send(.get(GcsApiTests.item("counted/gcs.bin") + "?alt=media")).body == content)
  }

  @Test func aFirebaseResumableChunkReadsItsUploadRowOnce() throws {
    let (s, table) = try Self.counted()
    defer { s.close() }
    let content = testBytes(300_000, seed: 47)
    let url = try s.startSession("counted/firebase.bin", length: content.count)
    var offset = 0
    for size in [200_000, 100_000] {
      let command = offset + size == content.count ? "upload, finalize" : "upload"
      table.reset()
      let r = try s.send(FirebaseWire.command(url, command, offset: offset, body: Array(content[offset..<offset + size])))
      #expect(r.status == 200, "\(r.text)")
      #expect(table.rowReads == 1, "the chunk at \(offset) read the upload row \(table.rowReads) times")
      offset += size
    }
    #expect(try s.objectBytes("counted/firebase.bin").body == content)
  }
}

/// The `uploads` statements, counting the reads of an upload's row (``UploadTable/row(_:)``
/// and ``UploadTable/exists(_:)``); everything else is forwarded as is.
final class CountingUploadTable: UploadTable {
  let inner: any UploadTable
  private let reads = Mutex(0)

  init(_ inner: any UploadTable) { self.inner = inner }

  var rowReads: Int { reads.withLock { $0 } }
  func reset() { reads.withLock { $0 = 0 } }

  func row(_ id: String) throws -> (upload: Upload, expired: Bool)? {
    reads.withLock { $0 += 1 }
    return try inner.row(id)
  }
  func exists(_ id: String) throws -> Bool {
    reads.withLock { $0 += 1 }
    return try inner.exists(id)
  }

  func insert(_ upload: Upload, expiry: Duration, lease: (held: HeldLease, duration: Duration)?) throws -> Date? {
    try inner.insert(upload, expiry: expiry, lease: lease)
  }
  func commitOffset(
    _ id: String, from: Int64, to: Int64, length: Int64?, state: UploadDataState, expiry: Duration, lease: Duration,
    hold: UploadLeaseHold
  ) throws -> Date? {
    try inner.commitOffset(id, from: from, to: to, length: length, state: state, expiry: expiry, lease: lease, hold: hold)
  }
  func record(_ id: String, state: UploadDataState, hold: UploadLeaseHold) throws -> Bool {
    try inner.record(id, state: state, hold: hold)
  }
  func complete(_ db: any Database, _ upload: Upload, from: Int64?, hold: UploadLeaseHold) throws {
    try inner.complete(db, upload, from: from, hold: hold)
  }
  func terminate(_ id: String, owner: String?) throws -> UploadDataState? { try inner.terminate(id, owner: owner) }
  func delete(_ id: String, unfinishedOnly: Bool, hold: UploadLeaseHold?) throws {
    try inner.delete(id, unfinishedOnly: unfinishedOnly, hold: hold)
  }
  func claim(_ id: String, token: String, duration: Duration, expected: Upload) throws -> Int64? {
    try inner.claim(id, token: token, duration: duration, expected: expected)
  }
  func renew(_ id: String, held: HeldLease, duration: Duration) throws -> Bool {
    try inner.renew(id, held: held, duration: duration)
  }
  func release(_ id: String, held: HeldLease) throws { try inner.release(id, held: held) }
  func isLeased(_ id: String) throws -> Bool { try inner.isLeased(id) }
  func inProgress(among ids: [String], now: Date) throws -> Set<String> { try inner.inProgress(among: ids, now: now) }
  func expire(dryRun: Bool) throws -> [(id: String, state: UploadDataState)] { try inner.expire(dryRun: dryRun) }
  func allIDs() throws -> Set<String> { try inner.allIDs() }
}
