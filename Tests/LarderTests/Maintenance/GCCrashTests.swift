import Foundation
import LarderCrypto
import LarderTestSupport
import Testing

@testable import Larder

/// A collection interrupted at each of its steps.
///
/// Two views of every interruption: the process that saw the failure goes on (its rollback
/// must put the trash back at once, because a server beside it may dedupe against the rows),
/// and a copy of the directory taken at the failure point is opened as if the process had been
/// SIGKILLed there (the copy holds exactly what the kernel would keep: committed SQLite pages and
/// the WAL, the renamed files; the -shm index is rebuilt on open, as after a crash).
@Suite struct GCCrashTests {
  static let points: [FaultPoint] = [.gcAfterTrash, .gcMidBatch, .gcAfterCommit]

  @Test(TestCatalog.sqliteOnly, arguments: points) func crashDuringCollectionLosesNothing(point: FaultPoint) throws {
    let dir = ScratchDirectory("crash")
    let crashCopy = ScratchDirectory("crash-copy")
    try FileManager.default.removeItem(at: crashCopy.url)
    let copyURL = crashCopy.url
    let directory = dir.url
    let larder = try TestStore.open(
      at: dir.url,
      configuration: .init(
        faults: FaultInjector { hit in
          guard hit == point, !FileManager.default.fileExists(atPath: copyURL.path) else { return }
          try FileManager.default.copyItem(at: directory, to: copyURL)
          try? FileManager.default.removeItem(at: copyURL.appendingPathComponent("larder.sqlite-shm"))
          throw InjectedFault(point: point)
        }))
    let kept = Fixture.contents(10, tag: "kept")
    let orphans = Fixture.contents(10, tag: "orphan")
    for (i, data) in kept.enumerated() { _ = try larder.objects.put(bucket: "b", name: "k\(i)", data: data) }
    for data in orphans { _ = try larder.files.put(data) }
    try Fixture.age(larder, by: 60)

    #expect(throws: InjectedFault(point: point)) {
      _ = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero, batchSize: 4))
    }
    // Batches hold 4 blobs; the mid-batch fault fires after 2 of them were moved.
    let movedBeforeFault = point == .gcMidBatch ? 2 : 4

    // 1. The process that failed: nothing referenced is missing, right now.
    try expectAllKept(larder, kept)
    let trashNow = POSIX.listDirectory(larder.blobs.trashDirectory.path).count
    #expect(trashNow == (point == .gcAfterCommit ? 4 : 0))
    #expect(try Fixture.count(larder, "blobs") == (point == .gcAfterCommit ? 16 : 20))
    let rerun = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero, batchSize: 4))
    #expect(rerun.trashRemoved == (point == .gcAfterCommit ? 4 : 0))
    #expect(rerun.blobsRemoved == (point == .gcAfterCommit ? 6 : 10))
    #expect(try Fixture.count(larder, "blobs") == 10)
    try expectAllKept(larder, kept)
    #expect(try Verifier(larder: larder).verify().findings == [])

    // 2. The directory as a crash there would leave it: open (recovery runs), verify, collect.
    let reopened = try TestStore.open(at: copyURL)
    if point == .gcAfterCommit {
      #expect(reopened.recovery == RecoveryReport(tempFilesRemoved: 0, trashRestored: 0, trashRemoved: 4))
      #expect(try Fixture.count(reopened, "blobs") == 16)
    } else {
      #expect(
        reopened.recovery
          == RecoveryReport(tempFilesRemoved: 0, trashRestored: movedBeforeFault, trashRemoved: 0))
      #expect(try Fixture.count(reopened, "blobs") == 20)
    }
    #expect(POSIX.listDirectory(reopened.blobs.trashDirectory.path) == [])
    let check = try Verifier(larder: reopened).verify()
    #expect(check.findings == [])
    #expect(check.isClean)
    try expectAllKept(reopened, kept)
    let finish = try GarbageCollector(larder: reopened).collect(options: .init(grace: .zero))
    #expect(finish.blobsRemoved == (point == .gcAfterCommit ? 6 : 10))
    #expect(try Fixture.count(reopened, "blobs") == 10)
    try expectAllKept(reopened, kept)
    #expect(try Verifier(larder: reopened).verify().findings == [])
  }

  private func expectAllKept(_ larder: Larder, _ kept: [Data]) throws {
    for (i, data) in kept.enumerated() {
      let object = try larder.objects.get(bucket: "b", name: "k\(i)")
      #expect(try larder.files.data(of: object.file) == data)
    }
  }
}
