import Foundation
import Larder
import LarderTestSupport
import Testing

/// `Catalog.write(durable: false)` (event delivery bookkeeping) relaxes the commit of that
/// transaction only: the writer connection goes back to durable commits for every write after it,
/// uploads included, whether the lazy write committed or threw.
@Suite struct LazyCommitTests {
  /// The writer's commit setting as a write sees it: SQLite's `synchronous` (2 = FULL, 1 =
  /// NORMAL), PostgreSQL's `synchronous_commit`.
  static func setting(_ db: any Database) throws -> String {
    if TestCatalog.isPostgres { return try db.row("SHOW synchronous_commit")?.string("synchronous_commit") ?? "?" }
    return String(try db.row("PRAGMA synchronous")?.int("synchronous") ?? -1)
  }

  @Test func aLazyWriteRelaxesOnlyItselfEvenWhenItThrows() throws {
    let larder = try TestStore.temporary()
    // The server's own setting comes back (the test PostgreSQL may run with it off already).
    let durable = try larder.catalog.write { try Self.setting($0) }
    let lazy = TestCatalog.isPostgres ? "off" : "1"
    if !TestCatalog.isPostgres { #expect(durable == "2") }
    #expect(try larder.catalog.write(durable: false) { try Self.setting($0) } == lazy)
    #expect(try larder.catalog.write { try Self.setting($0) } == durable)
    struct Refused: Error {}
    #expect(throws: Refused.self) { try larder.catalog.write(durable: false) { _ in throw Refused() } }
    #expect(try larder.catalog.write { try Self.setting($0) } == durable)
    // An upload after lazy writes commits durably and is there.
    _ = try larder.objects.put(bucket: "app", name: "after", data: Data("x".utf8))
    #expect(try larder.objects.find(bucket: "app", name: "after") != nil)
  }
}
