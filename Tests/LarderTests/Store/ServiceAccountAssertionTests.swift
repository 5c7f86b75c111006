import Foundation
import Larder
import LarderTestSupport
import Testing

/// The catalog's memory of exchanged `/token` assertions (issue 37): each id once, until it
/// expires, shared by every store open on the catalog (every node).
@Suite struct ServiceAccountAssertionTests {
  @Test func anIdIsRecordedOnceUntilItExpiresThenPruned() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let larder = try TestStore.open(at: directory)
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let expires = t0.addingTimeInterval(3660)
    #expect(try larder.recordServiceAccountAssertion(id: "a", expiresAt: expires, now: t0) == nil)
    let repeated = try larder.recordServiceAccountAssertion(id: "a", expiresAt: expires, now: t0.addingTimeInterval(30))
    #expect(repeated == t0, "a repeat answers the first exchange's time")
    #expect(try larder.recordServiceAccountAssertion(id: "b", expiresAt: expires, now: t0.addingTimeInterval(31)) == nil)
    // Another store on the same catalog (another node) sees it.
    let other = try TestStore.open(at: directory)
    #expect(try other.recordServiceAccountAssertion(id: "a", expiresAt: expires, now: t0.addingTimeInterval(60)) == t0)
    // Once expired, the row is pruned by the next call, and nothing is left behind.
    let later = expires.addingTimeInterval(1)
    #expect(try larder.recordServiceAccountAssertion(id: "c", expiresAt: later.addingTimeInterval(60), now: later) == nil)
    let ids = try larder.catalog.read { db in
      try db.rows("SELECT id FROM service_account_assertions ORDER BY id").compactMap { $0.string("id") }
    }
    #expect(ids == ["c"])
  }
}
