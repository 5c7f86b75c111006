import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// A temp file is abandoned only when no writer can still be using it: gone, young or locked
/// files stay; a symlink or an old unlocked file goes.
@Suite struct AbandonedTempFileTests {
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
    let larder = try TestStore.open(at: dir.url)
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
}
