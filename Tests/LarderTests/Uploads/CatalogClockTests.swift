import Foundation
import Testing

@testable import Larder

/// The catalog's clock, which leases of resumable uploads across nodes are claimed, renewed and
/// judged on (ARCHITECTURE.md, "Resumable uploads across nodes"): on SQLite and, in the PostgreSQL
/// pass, on PostgreSQL.
@Suite struct CatalogClockTests {
  /// Proves: `SQLDialect.nowMilliseconds` is the time in the unit dates are stored in
  /// (milliseconds since 1970, `SQLValue`): seconds, days or another epoch would make every
  /// lease live forever or never. The catalog runs on this machine here, so its clock is ours.
  @Test func theCatalogsClockIsMillisecondsSince1970() throws {
    let scratch = try UploadScratch()
    let (larder, _) = try scratch.open()
    let before = Date()
    let now = try larder.catalog.read { db in
      try db.row("SELECT \(db.dialect.nowMilliseconds) AS now")?.date("now")
    }
    let after = Date()
    let catalog = try #require(now)
    #expect(catalog >= before - 0.05 && catalog <= after + 0.05, "catalog \(catalog), here \(before)…\(after)")
  }
}

/// Resumable uploads expire on the catalog's clock, as leases are claimed on it (issue 31):
/// `expires_at` is written as the catalog's now plus the expiry and compared with the catalog's
/// now, on SQLite and, in the PostgreSQL pass, on PostgreSQL.
@Suite struct UploadExpiryClockTests {
  /// Proves: a node whose clock runs two hours ahead (its store and its collector given that
  /// clock through their inits) neither reads another node's upload in progress as expired nor
  /// collects it, and the upload it creates itself expires an hour from the catalog's now, not
  /// from its own. Node A then finishes the upload with the exact bytes.
  @Test func aNodeWhoseClockRunsAheadDoesNotExpireAnotherNodesUpload() throws {
    let scratch = try UploadScratch()
    let (larder, _) = try scratch.open()
    let ahead = Duration.seconds(2 * 3600)
    let nodeA = UploadStore(larder: larder, expiry: .seconds(3600))
    let nodeB = UploadStore(
      larder: larder, expiry: .seconds(3600), clock: { Date() + ahead.timeInterval })
    let content = bytes(300_000, seed: 7)
    let upload = try nodeA.create(bucket: "app", name: "clock.bin", owner: "u", length: Int64(content.count))
    try append(nodeA, upload.id, owner: "u", at: 0, content[0..<100_000])

    #expect(try nodeB.upload(id: upload.id, owner: "u").offset == 100_000)
    let collector = GarbageCollector(larder: larder, now: { Date() + ahead.timeInterval })
    #expect(try collector.collect(options: .init(dryRun: true)).uploadsExpired == 0)
    #expect(try collector.collect().uploadsExpired == 0)

    // B's own upload: an hour from the catalog's clock (the catalog runs on this machine here).
    let before = Date()
    let mine = try nodeB.create(bucket: "app", name: "b.bin", owner: "u", length: 3)
    let stored = try larder.catalog.read { db in
      try db.row("SELECT expires_at FROM uploads WHERE id = ?", [mine.id])?.date("expires_at")
    }
    let expires = try #require(stored)
    #expect(mine.expiresAt == expires)
    #expect(abs(expires.timeIntervalSince(before) - 3600) < 60, "expires \(expires), created about \(before)")

    if case .complete(let done) = try append(nodeA, upload.id, owner: "u", at: 100_000, content[100_000...]) {
      let object = try nodeA.publish(done)
      #expect([UInt8](try larder.files.data(of: object.file)) == content)
    } else {
      Issue.record("the upload did not complete")
    }
  }

  /// Proves: an upload whose expiry has passed on the catalog's clock is expired for every node
  /// and collected, whatever the node's own clock says (here: one running an hour behind).
  @Test func anUploadPastItsExpiryOnTheCatalogsClockExpiresEverywhere() throws {
    let scratch = try UploadScratch()
    let (larder, _) = try scratch.open()
    let behind = UploadStore(
      larder: larder, expiry: .milliseconds(1), clock: { Date() - 3600 })
    let upload = try behind.create(bucket: "app", name: "gone.bin", owner: nil, length: 10)
    Thread.sleep(forTimeInterval: 0.05)
    #expect(throws: UploadError.expired(id: upload.id)) { _ = try behind.upload(id: upload.id, owner: nil) }
    let collector = GarbageCollector(larder: larder, now: { Date() - 3600 })
    #expect(try collector.collect().uploadsExpired == 1)
  }
}
