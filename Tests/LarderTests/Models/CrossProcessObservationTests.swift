import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// On PostgreSQL, observation sees commits made through another store on the same catalog (as
/// another process or node would make them), through `LISTEN/NOTIFY`. SQLite's observation is
/// per process, so this runs in the PostgreSQL pass only.
@Suite(.enabled(if: TestCatalog.isPostgres, "SQLite observes this process's commits only"))
struct CrossProcessObservationTests {
  @Test func aCommitThroughAnotherStoreReachesThisStoresObserver() async throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let here = try TestStore.open(at: directory)
    let elsewhere = try TestStore.open(at: directory)  // its own connections, as another node has
    try here.models.save(Score(id: "a", name: "Ada", points: 3, visible: true))

    let log = ChangeLog<Score>()
    let consumer = log.consume(try here.models.observations(of: Query(Score.self).sorted(by: "points", .descending)))
    defer { consumer.cancel() }
    let initial = await log.wait(forCount: 1)
    #expect(initial.first?.results.map(\.id) == ["a"])

    try elsewhere.models.save(Score(id: "b", name: "Bo", points: 9, visible: true))
    let afterInsert = await log.wait(forCount: 2)
    try #require(afterInsert.count >= 2)
    #expect(afterInsert.last?.results.map(\.id) == ["b", "a"])
    guard case .update(_, let deletions, let insertions, let modifications) = afterInsert.last! else {
      Issue.record("not an update: \(afterInsert)")
      return
    }
    #expect((deletions, insertions, modifications) == ([], [0], []))

    // A rolled-back write announces nothing: its NOTIFY is discarded with it.
    struct Abort: Error {}
    #expect(throws: Abort.self) {
      try elsewhere.write { tx in
        try tx.save(Score(id: "c", name: "Cy", points: 1, visible: true))
        throw Abort()
      }
    }
    _ = try elsewhere.models.delete(Score.self, id: "a")
    let afterDelete = await log.wait(forCount: 3)
    #expect(afterDelete.count == 3)
    #expect(afterDelete.last?.results.map(\.id) == ["b"])
  }
}
