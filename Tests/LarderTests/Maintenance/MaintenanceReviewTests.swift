import Foundation
import LarderCrypto
import Synchronization
import Testing

@testable import Larder

/// The review fixes of the collector, the verifier and recovery, one behaviour per test.
@Suite struct MaintenanceReviewTests {
  @Test func failedOpenIsAbandonedOnlyForASymlink() throws {
    let dir = ScratchDirectory("abandoned")
    // Gone (a writer that just committed and unlinked its file): not abandoned, nothing removed.
    #expect(!Recovery.abandoned("\(dir.path)/gone", remove: false))
    #expect(!Recovery.abandoned("\(dir.path)/gone", remove: true))
    // A symlink (refused by O_NOFOLLOW with ELOOP): abandoned; only the link goes.
    let target = "\(dir.path)/target"
    try Data("keep".utf8).write(to: URL(fileURLWithPath: target))
    #expect(symlink(target, "\(dir.path)/link") == 0)
    #expect(Recovery.abandoned("\(dir.path)/link", remove: false))
    #expect(Recovery.abandoned("\(dir.path)/link", remove: true))
    #expect(POSIX.listDirectory(dir.path) == ["target"])
    // A file whose writer holds its lock stays; once released it is abandoned.
    let fd = open(target, O_RDONLY)
    #expect(fd >= 0 && flock(fd, LOCK_EX) == 0)
    #expect(!Recovery.abandoned(target, remove: true))
    close(fd)
    #expect(Recovery.abandoned(target, remove: true))
    #expect(POSIX.listDirectory(dir.path) == [])
  }

  @Test func verifierLeavesYoungAndLockedTempFilesAlone() throws {
    let dir = ScratchDirectory("verify-temp")
    let larder = try Larder(at: dir.url)
    let tmp = larder.blobs.tmpDirectory.path
    // A writer between open(O_EXCL) and flock: young, no lock yet.
    try Fixture.plantTemp(larder, name: "young.part", bytes: 4, age: 0)
    // A slow writer holding its lock.
    try Fixture.plantTemp(larder, name: "held.part", bytes: 5, age: 600)
    let fd = open("\(tmp)/held.part", O_RDONLY)
    defer { close(fd) }
    #expect(fd >= 0 && flock(fd, LOCK_EX) == 0)
    // Only the old, free one is abandoned.
    try Fixture.plantTemp(larder, name: "dead.part", bytes: 6, age: 600)

    let report = try Verifier(larder: larder).verify()
    #expect(report.findings.map(\.kind) == [.abandonedTemp])
    #expect(report.findings.map(\.path) == ["\(tmp)/dead.part"])
    let repaired = try Verifier(larder: larder).verify(repair: true)
    #expect(repaired.isClean && repaired.findings.map(\.repaired) == [true])
    #expect(Set(POSIX.listDirectory(tmp)) == ["young.part", "held.part"])
    #expect(try Verifier(larder: larder).verify(repair: true).findings == [])
  }

  @Test func plainVerifyTakesTheCollectorLockEvenOnAFreshStore() throws {
    let dir = ScratchDirectory("verify-lock")
    let larder = try Larder(at: dir.url)
    let lockPath = CollectorLock.path(in: larder.directory)
    #expect(!FileManager.default.fileExists(atPath: lockPath))
    _ = try Verifier(larder: larder).verify()
    #expect(FileManager.default.fileExists(atPath: lockPath))
    // A verification holding it refuses a collection, and the reverse.
    let held = try CollectorLock.acquire(in: larder.directory)
    #expect(throws: MaintenanceError.collectorBusy(lockPath: lockPath)) {
      _ = try Verifier(larder: larder).verify()
    }
    held?.release()
  }

  @Test func failedCommitPutsTrashedBlobsBackAtOnce() throws {
    let dir = ScratchDirectory("gc-commit")
    let larder = try Larder(at: dir.url)
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

  @Test func quarantiningABlobNoFileUsesDropsItsRow() throws {
    let dir = ScratchDirectory("verify-quarantine")
    let larder = try Larder(at: dir.url)
    let content = Data("a blob no file uses".utf8)
    let hex = Fixture.sha256Hex(content)
    let path = larder.blobs.path(forHex: hex)
    try POSIX.makeDirectory((path as NSString).deletingLastPathComponent)
    try Data("corrupted bytes here".utf8).write(to: URL(fileURLWithPath: path))  // wrong hash
    #expect(chmod(path, 0o444) == 0)
    try larder.catalog.write { db in
      try db.execute(
        "INSERT INTO blobs(sha256, size, created_at) VALUES (?, ?, 0)", [Hex.decode(hex)!, content.count])
    }
    let report = try Verifier(larder: larder).verify(repair: true)
    #expect(report.findings.map(\.kind) == [.sizeMismatch] || report.findings.map(\.kind) == [.hashMismatch])
    #expect(report.isClean)
    #expect(try Fixture.count(larder, "blobs") == 0)
    #expect(POSIX.listDirectory(larder.blobs.quarantineDirectory.path) == [hex])
    let after = try Verifier(larder: larder).verify()
    #expect(after.findings == [])
    #expect(after.blobsChecked == 0)
  }

  @Test func unreferencedFilesAreReleasedInBatches() throws {
    let dir = ScratchDirectory("gc-batches")
    let larder = try Larder(at: dir.url)
    for data in Fixture.contents(5, tag: "batch") { _ = try larder.files.put(data) }
    _ = try larder.objects.put(bucket: "b", name: "kept", data: Data("kept".utf8))
    try Fixture.age(larder, by: 60)
    let seen = Mutex<[Int]>([])
    let report = try GarbageCollector(larder: larder).collect(
      options: .init(
        grace: .zero, batchSize: 2,
        progress: { p in if p.phase == .files { seen.withLock { $0.append(p.processed) } } }))
    #expect(report.filesReleased == 5)
    #expect(seen.withLock { $0 } == [0, 2, 4, 5])
    #expect(try Fixture.count(larder, "files") == 1)
    #expect(report.blobsRemoved == 5)
    #expect(report.batches == 3)
  }

  @Test func trashEntryWithASuffixIsNotABlob() throws {
    let dir = ScratchDirectory("trash-suffix")
    let larder = try Larder(at: dir.url)
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

  @Test func leafRangesCoverExactlyTheirDigests() {
    #expect(BlobTreeWalker.range(ofLeaf: "abcd")! == ([0xab, 0xcd], [0xab, 0xce]))
    #expect(BlobTreeWalker.range(ofLeaf: "abff")! == ([0xab, 0xff], [0xac, 0x00]))
    #expect(BlobTreeWalker.range(ofLeaf: "0000")! == ([0x00, 0x00], [0x00, 0x01]))
    let top = BlobTreeWalker.range(ofLeaf: "ffff")!
    #expect(top.lower == [0xff, 0xff] && top.upper == nil)
    #expect(BlobTreeWalker.range(ofLeaf: "zz") == nil)
    #expect(BlobTreeWalker.range(ofLeaf: "abc") == nil)
  }

  @Test func strayDetectionUsesEachLeafsRows() throws {
    let dir = ScratchDirectory("gc-leaf")
    let larder = try Larder(at: dir.url)
    // Blobs sharing a leaf with strays, and a blob in the last leaf of all.
    let kept = Fixture.contents(40, tag: "leaf")
    for (i, data) in kept.enumerated() { _ = try larder.objects.put(bucket: "b", name: "k\(i)", data: data) }
    var strays: [String] = []
    for data in kept.prefix(5) {
      // Same leaf as a kept blob, a different digest.
      let hex = Fixture.sha256Hex(data)
      let stray = String(hex.prefix(4)) + String(repeating: "0", count: 60)
      let path = larder.blobs.path(forHex: stray)
      try Data("stray".utf8).write(to: URL(fileURLWithPath: path))
      strays.append(path)
    }
    let last = "ffff" + String(repeating: "e", count: 60)
    let lastPath = larder.blobs.path(forHex: last)
    try POSIX.makeDirectory((lastPath as NSString).deletingLastPathComponent)
    try POSIX.makeDirectory(((lastPath as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent)
    try Data("last".utf8).write(to: URL(fileURLWithPath: lastPath))
    strays.append(lastPath)

    let report = try Verifier(larder: larder).verify()
    #expect(Set(report.findings.compactMap(\.path)) == Set(strays))
    #expect(report.findings.allSatisfy { $0.kind == .strayBlobFile })
    let gc = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(gc.strayFilesRemoved == 6)
    #expect(gc.strayBytesFreed == 5 * 5 + 4)
    #expect(POSIX.listDirectory(larder.blobs.trashDirectory.path) == [])
    #expect(try Verifier(larder: larder).verify().findings == [])
    for (i, data) in kept.enumerated() {
      #expect(try larder.files.data(of: larder.objects.get(bucket: "b", name: "k\(i)").file) == data)
    }
  }

  @Test func unexpectedDirectoriesAreReportedAndLeftForAHuman() throws {
    let dir = ScratchDirectory("verify-dirs")
    let larder = try Larder(at: dir.url)
    let content = Data("a blob beside odd directories".utf8)
    _ = try larder.objects.put(bucket: "b", name: "o", data: content)
    let leaf = (Fixture.blobPath(larder, content) as NSString).deletingLastPathComponent
    let root = larder.blobs.blobsDirectory.path
    let odd = ["\(root)/not-hex", "\(root)/\(Fixture.sha256Hex(content).prefix(2))/zz", "\(leaf)/inner"]
    for path in odd { try POSIX.makeDirectory(path) }

    let report = try Verifier(larder: larder).verify(repair: true)
    #expect(report.findings.map(\.kind) == [.strayBlobFile, .strayBlobFile, .strayBlobFile])
    #expect(Set(report.findings.compactMap(\.path)) == Set(odd))
    #expect(report.findings.allSatisfy { !$0.repaired && $0.detail == "a directory where none belongs" })
    for path in odd { #expect(FileManager.default.fileExists(atPath: path)) }
    let dry = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero, dryRun: true))
    let real = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(dry.strayFilesRemoved == 0 && real.strayFilesRemoved == 0)
  }
}
