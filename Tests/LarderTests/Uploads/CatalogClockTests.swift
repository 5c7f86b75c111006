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
