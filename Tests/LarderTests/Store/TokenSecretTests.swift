import Foundation
import LarderTestSupport
import Larder
import Synchronization
import Testing

/// The token secret lives in the catalog (`settings.token_secret`): made once, shared by every
/// opening of the store, adopted from a legacy `DATA/secret` while the row is absent.
@Suite struct TokenSecretTests {
  static func rows(_ larder: Larder) throws -> [[UInt8]] {
    try larder.catalog.read { db in
      try db.rows("SELECT value FROM settings WHERE key = 'token_secret'").map { $0.bytes("value") ?? [] }
    }
  }

  @Test func madeOnceAndSharedByEveryOpening() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url)
    #expect(try Self.rows(larder).isEmpty)
    let first = try larder.tokenSecret(adopting: { nil })
    #expect(first.count == 32)
    #expect(try Self.rows(larder) == [first])
    // Once the row exists the legacy source is not consulted.
    var asked = 0
    #expect(try larder.tokenSecret(adopting: { asked += 1; return Array(repeating: 1, count: 32) }) == first)
    #expect(asked == 0)
    let reopened = try TestStore.open(at: scratch.url)
    #expect(try reopened.tokenSecret(adopting: { nil }) == first)
    // Another store gets another key.
    let other = try StoreScratch()
    #expect(try TestStore.open(at: other.url).tokenSecret(adopting: { nil }) != first)
  }

  @Test func adoptsTheLegacyKeyWhileTheRowIsAbsent() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url)
    let legacy = (0..<32).map { UInt8(255 - $0) }
    #expect(try larder.tokenSecret(adopting: { legacy }) == legacy)
    #expect(try Self.rows(larder) == [legacy])
  }

  @Test func aLegacyKeyOfTheWrongLengthIsRefusedAndNothingIsWritten() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url)
    #expect(throws: LarderError.invalidArgument("the token secret to adopt is 16 bytes, expected 32")) {
      try larder.tokenSecret(adopting: { Array(repeating: 7, count: 16) })
    }
    #expect(try Self.rows(larder).isEmpty)
  }

  @Test func aMalformedRowIsRefused() throws {
    let scratch = try StoreScratch()
    let larder = try TestStore.open(at: scratch.url)
    try larder.catalog.write { db in
      try db.execute("INSERT INTO settings(key, value) VALUES ('token_secret', ?)", [[UInt8](repeating: 1, count: 5)])
    }
    #expect(
      throws: LarderError.invalidArgument(
        "the catalog's token_secret is not 32 bytes; delete the row to make a new one (this invalidates issued tokens)")
    ) { try larder.tokenSecret(adopting: { nil }) }
  }

  @Test func racingOpeningsAgreeOnOneKey() throws {
    // Two openings of one store (two writer connections: on PostgreSQL, two sessions) race to
    // make the row; the write lock lets one insert and the others read it.
    let scratch = try StoreScratch()
    let stores = [try TestStore.open(at: scratch.url), try TestStore.open(at: scratch.url)]
    let results = Mutex<[[UInt8]]>([])
    let failures = Mutex<[String]>([])
    DispatchQueue.concurrentPerform(iterations: 8) { i in
      do {
        let secret = try stores[i % 2].tokenSecret(adopting: { nil })
        results.withLock { $0.append(secret) }
      } catch {
        failures.withLock { $0.append("\(error)") }
      }
    }
    #expect(failures.withLock { $0 } == [])
    let all = results.withLock { $0 }
    #expect(all.count == 8)
    #expect(Set(all).count == 1)
    #expect(try Self.rows(stores[0]) == [all[0]])
  }
}
