import Foundation
import Larder
import LarderTestSupport
import Testing

/// Opening a store puts `tmp/` and `trash/` back in order without touching live writes.
@Suite struct RecoveryTests {
  @Test func abandonedTempFileIsRemovedAndLockedOneKept() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    do { _ = try TestStore.open(at: directory) }
    let tmp = directory.appendingPathComponent("tmp")
    let abandoned = tmp.appendingPathComponent("abandoned.part").path
    let locked = tmp.appendingPathComponent("locked.part").path
    #expect(FileManager.default.createFile(atPath: abandoned, contents: Data("left by a crash".utf8)))
    #expect(FileManager.default.createFile(atPath: locked, contents: Data("still being written".utf8)))
    // Another open file description holds the lock, as a writer in another process would.
    let fd = open(locked, O_RDWR | O_CLOEXEC)
    #expect(fd >= 0)
    #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)

    let reopened = try TestStore.open(at: directory)
    #expect(reopened.recovery.tempFilesRemoved == 1)
    #expect(!FileManager.default.fileExists(atPath: abandoned))
    #expect(FileManager.default.contents(atPath: locked) == Data("still being written".utf8))

    // Once the writer is gone, the next open removes it.
    close(fd)
    let again = try TestStore.open(at: directory)
    #expect(again.recovery.tempFilesRemoved == 1)
    #expect(again.storeTempFiles() == [])
  }

  /// A second store on the same directory (like the CLI beside a server) leaves a live writer's temp alone.
  @Test func liveWriterSurvivesAnotherStoreOpening() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let first = try TestStore.open(at: directory)
    let writer = try first.files.makeWriter()
    try writer.write(Data("part one, ".utf8))
    let second = try TestStore.open(at: directory)
    #expect(second.recovery.tempFilesRemoved == 0)
    #expect(second.storeTempFiles().count == 1)
    try writer.write(Data("part two".utf8))
    let staged = try writer.finish()
    // Finished but not committed: still locked, so still kept.
    let third = try TestStore.open(at: directory)
    #expect(third.recovery.tempFilesRemoved == 0)
    let file = try first.files.commit(staged)
    #expect(try second.files.data(of: file) == Data("part one, part two".utf8))
    #expect(first.storeTempFiles() == [])
  }

  /// A symbolic link planted in `tmp/` is removed as a name; its target is not followed or touched.
  @Test func symlinkInTempIsRemovedWithoutFollowing() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    do { _ = try TestStore.open(at: directory) }
    let target = try scratch.file("precious.txt", Array("do not delete".utf8))
    let link = directory.appendingPathComponent("tmp/evil.part").path
    #expect(symlink(target.path, link) == 0)
    let reopened = try TestStore.open(at: directory)
    #expect(reopened.recovery.tempFilesRemoved == 1)
    #expect(reopened.storeTempFiles() == [])
    #expect(FileManager.default.contents(atPath: target.path) == Data("do not delete".utf8))
  }

  @Test func trashEntryWithARowGoesBackAndOthersAreRemoved() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let bytes = Data("collected too early".utf8)
    let hex = sha256Hex(bytes)
    let blobPath = "blobs/sha256/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))/\(hex)"
    do {
      let larder = try TestStore.open(at: directory)
      let object = try larder.objects.put(bucket: "b", name: "kept.txt", data: bytes)
      #expect(object.file.sha256 == hex)
    }
    // A collection that crashed after moving the file but before committing the row's deletion.
    try FileManager.default.moveItem(
      at: directory.appendingPathComponent(blobPath), to: directory.appendingPathComponent("trash/\(hex)"))
    // Entries with no row: a collected blob, and junk.
    let orphan = sha256Hex(Data("no row for me".utf8))
    #expect(FileManager.default.createFile(atPath: directory.appendingPathComponent("trash/\(orphan)").path, contents: Data("no row for me".utf8)))
    #expect(FileManager.default.createFile(atPath: directory.appendingPathComponent("trash/not-a-digest").path, contents: Data()))

    let reopened = try TestStore.open(at: directory)
    #expect(reopened.recovery.trashRestored == 1)
    #expect(reopened.recovery.trashRemoved == 2)
    #expect(reopened.storeTrashFiles() == [])
    #expect(reopened.storeBlobFiles() == [blobPath])
    let object = try reopened.objects.get(bucket: "b", name: "kept.txt")
    #expect(try reopened.files.data(of: object.file) == bytes)
    #expect(try reopened.storeCounts() == [1, 1, 1])
  }

  @Test(TestCatalog.sqliteOnly) func catalogFromANewerLarderIsRefused() throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    do { _ = try TestStore.open(at: directory) }
    do {
      let db = try SQLiteDatabase(path: directory.appendingPathComponent("larder.sqlite").path)
      try db.execute("PRAGMA user_version = 9999")
    }
    let error = #expect(throws: LarderError.self) { try TestStore.open(at: directory) }
    guard case .catalogTooNew(let version, let supported) = error else {
      Issue.record("expected catalogTooNew, got \(String(describing: error))")
      return
    }
    #expect(version == 9999)
    #expect(supported >= 1 && supported < 9999)
  }
}
