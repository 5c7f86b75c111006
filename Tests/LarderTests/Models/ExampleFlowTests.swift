import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// docs/models.md's example, compiled and run: upload, attach, query, observe, delete, and see the
/// file become unreferenced (what the collector then removes after its grace period).
@Suite struct ExampleFlowTests {
  struct User: Model, Equatable {
    var id: String
    var name: String
    var avatar: File?
    var album: [File] = []
    static let indexes = [ModelIndex("name")]
  }

  @Test func uploadAttachQueryObserveDelete() async throws {
    let larder = try TestStore.temporary()  // or: try TestStore.open(at: URL(fileURLWithPath: "data"))

    // 1. Upload: bytes in, a File out (also put(contentsOf:) and a streaming put).
    let avatar = try larder.files.put(Data("PNG…pretend".utf8), filename: "ada.png")

    // 2. Attach: saving the model records its File properties as attachments, atomically.
    try larder.models.save(User(id: "u1", name: "Ada", avatar: avatar))
    try larder.models.save(User(id: "u2", name: "Alan"))

    // 3. Query.
    let a = try larder.models.query(Query(User.self).filter(Field("name").hasPrefix("A")).sorted(by: "name"))
    #expect(a.map(\.id) == ["u1", "u2"])
    let ada = try #require(try larder.models.find(User.self, id: "u1"))
    #expect(try larder.files.data(of: ada.avatar!, maxSize: 5 << 20) == Data("PNG…pretend".utf8))

    // 4. Observe: an initial result, then index-set updates after each commit.
    var updates = try larder.models.observations(of: Query(User.self).sorted(by: "name")).makeAsyncIterator()
    var rows = await updates.next()!.results
    #expect(rows.map(\.name) == ["Ada", "Alan"])

    // 5. Delete (atomically with another write); the observer sees the deletion.
    try larder.write { tx in
      try tx.delete(User.self, id: "u1")
      try tx.save(User(id: "u2", name: "Alan Turing"))
    }
    let change = await updates.next()!
    guard case .update(_, let deletions, let insertions, let modifications) = change else {
      Issue.record("expected an update")
      return
    }
    #expect((deletions, insertions, modifications) == ([0], [], [0]))
    rows = change.applied(to: rows)
    #expect(rows.map(\.name) == ["Alan Turing"])

    // 6. The avatar is now unreferenced: no object and no attachment keeps it. The collector
    //    (`larder gc`) removes it once it is older than the grace period.
    let unreferenced = try larder.catalog.read { db in
      try db.row(
        """
        SELECT count(*) AS n FROM files f WHERE f.id = ?
          AND NOT EXISTS (SELECT 1 FROM objects o WHERE o.file_id = f.id)
          AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.file_id = f.id)
        """, [avatar.id])?.int("n")
    }
    #expect(unreferenced == 1)
  }
}
