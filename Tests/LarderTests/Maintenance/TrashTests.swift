import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// Blobs moved to trash/ during a collection come back when its commit fails; entries that are
/// not blob names are removed, never restored.
@Suite struct TrashTests {
  @Test(TestCatalog.sqliteOnly) func failedCommitPutsTrashedBlobsBackAtOnce() throws {
    let dir = ScratchDirectory("gc-commit")
    let larder = try TestStore.open(at: dir.url)
    let orphans = Fixture.contents(3, tag: "commit")
    for data in orphans { _ = try larder.files.put(data) }
    try Fixture.age(larder, by: 60)
    // Every blob delete adds a row that breaks a deferred foreign key: the statements succeed,
    // the COMMIT fails (after the files were moved into trash/).
    try larder.catalog.write { db in
      try db.execute("CREATE TABLE guard_parent(id INTEGER PRIMARY KEY)")
      try db.execute(
        "CREATE TABLE guard_child(ref INTEGER REFERENCES guard_parent(id) DEFERRABLE INITIALLY DEFERRED)")
      try db.execute(
        "CREATE TRIGGER guard_blobs AFTER DELETE ON blobs BEGIN INSERT INTO guard_child(ref) VALUES (1); END")
    }
    #expect(throws: DatabaseError.self) {
      _ = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    }
    #expect(POSIX.listDirectory(larder.blobs.trashDirectory.path) == [])
    #expect(try Fixture.count(larder, "blobs") == 3)
    for data in orphans {
      #expect(FileManager.default.contents(atPath: Fixture.blobPath(larder, data)) == data)
    }
    try larder.catalog.write { db in try db.execute("DROP TRIGGER guard_blobs") }
    #expect(try Verifier(larder: larder).verify().findings == [])
    let gc = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(gc.blobsRemoved == 3 && gc.trashRestored == 0)
  }

  @Test func trashEntryWithASuffixIsNotABlob() throws {
    let dir = ScratchDirectory("trash-suffix")
    let larder = try TestStore.open(at: dir.url)
    let content = Data("in trash with a suffix".utf8)
    _ = try larder.objects.put(bucket: "b", name: "o", data: content)
    let hex = Fixture.sha256Hex(content)
    let path = larder.blobs.path(forHex: hex)
    let planted = "\(larder.blobs.trashDirectory.path)/\(hex).old"
    #expect(rename(path, planted) == 0)
    let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(report.trashRestored == 0 && report.trashRemoved == 1)
    #expect(!FileManager.default.fileExists(atPath: path))
    #expect(POSIX.listDirectory(larder.blobs.trashDirectory.path) == [])
  }
}
