import Foundation
import LarderTestSupport
import LarderCrypto
import Synchronization
import Testing

@testable import Larder

@Suite struct GarbageCollectorTests {
  @Test func collectsUnreferencedAndKeepsReferenced() throws {
    let dir = ScratchDirectory()
    let larder = try TestStore.open(at: dir.url)
    let kept = Data("kept content".utf8)
    let dropped = Data("content of a deleted object".utf8)
    let loose = Data("never attached".utf8)
    _ = try larder.objects.put(bucket: "app", name: "kept.txt", data: kept)
    _ = try larder.objects.put(bucket: "app", name: "dropped.txt", data: dropped)
    // The same content as a kept object, released: its blob must stay.
    _ = try larder.objects.put(bucket: "app", name: "twin.txt", data: kept)
    _ = try larder.files.put(loose)
    try larder.objects.delete(bucket: "app", name: "dropped.txt")
    try larder.objects.delete(bucket: "app", name: "twin.txt")
    try Fixture.age(larder, by: 7200)

    let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .seconds(3600)))
    #expect(report.filesReleased == 3)
    #expect(report.blobsRemoved == 2)
    #expect(report.blobBytesFreed == Int64(dropped.count + loose.count))
    #expect(report.bytesFreed == Int64(dropped.count + loose.count))
    #expect(report.batches == 1)
    #expect(report.strayFilesRemoved == 0 && report.tempFilesRemoved == 0 && report.uploadsExpired == 0)
    #expect(try Fixture.count(larder, "blobs") == 1)
    #expect(try Fixture.count(larder, "files") == 1)
    #expect(!FileManager.default.fileExists(atPath: Fixture.blobPath(larder, dropped)))
    #expect(!FileManager.default.fileExists(atPath: Fixture.blobPath(larder, loose)))
    #expect(POSIX.listDirectory(larder.blobs.trashDirectory.path) == [])
    let object = try larder.objects.get(bucket: "app", name: "kept.txt")
    #expect(try larder.files.data(of: object.file) == kept)
    #expect(try Verifier(larder: larder).verify().isClean)
  }

  @Test func graceKeepsYoungFilesAndCollectsOldOnes() throws {
    let dir = ScratchDirectory()
    let larder = try TestStore.open(at: dir.url)
    let old = try larder.files.put(Data("old upload".utf8))
    try Fixture.age(larder, by: 7200)
    let young = try larder.files.put(Data("young upload".utf8))

    let first = try GarbageCollector(larder: larder).collect(options: .init(grace: .seconds(3600)))
    #expect(first.filesReleased == 1)
    #expect(first.blobsRemoved == 1)
    #expect(try larder.files.file(id: old.id) == nil)
    #expect(try larder.files.file(id: young.id)?.sha256 == young.sha256)
    #expect(try larder.files.data(of: young) == Data("young upload".utf8))

    let second = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(second.filesReleased == 1)
    #expect(second.blobsRemoved == 1)
    #expect(try Fixture.count(larder, "blobs") == 0)
  }

  @Test func dryRunChangesNothingAndSecondRunDoesNothing() throws {
    let dir = ScratchDirectory()
    let larder = try TestStore.open(at: dir.url)
    let victim = dir.url.appendingPathComponent("victim")
    try Data("must survive".utf8).write(to: victim)
    // Something of every kind the collector removes.
    _ = try larder.objects.put(bucket: "app", name: "kept", data: Data("kept".utf8))
    _ = try larder.files.put(Data("orphan one".utf8))
    _ = try larder.files.put(Data("orphan two!".utf8))
    try Fixture.age(larder, by: 100)
    let now = Date()
    try larder.catalog.write { db in
      for (id, expires) in [
        ("up1", now.addingTimeInterval(-10)), ("../victim", now.addingTimeInterval(-10)),
        ("up2", now.addingTimeInterval(3600)),
      ] {
        try db.execute(
          "INSERT INTO uploads(id, bucket, expires_at, created_at) VALUES (?, 'app', ?, ?)",
          [id, expires, now])
      }
    }
    let uploads = larder.blobs.uploadsDirectory.path
    try Data(repeating: 1, count: 1000).write(to: URL(fileURLWithPath: "\(uploads)/up1"))
    try Data(repeating: 3, count: 50).write(to: URL(fileURLWithPath: "\(uploads)/up2"))
    let strayContent = Data("a stray blob".utf8)
    let strayPath = Fixture.blobPath(larder, strayContent)
    try POSIX.makeDirectory((strayPath as NSString).deletingLastPathComponent)
    try strayContent.write(to: URL(fileURLWithPath: strayPath))
    try Data(repeating: 9, count: 33).write(
      to: URL(fileURLWithPath: "\(larder.blobs.blobsDirectory.path)/misplaced"))
    try Fixture.plantTemp(larder, name: "old.part", bytes: 77, age: 600)
    try Fixture.plantTemp(larder, name: "fresh.part", bytes: 5, age: 0)

    let before = try Fixture.snapshot(larder)
    let dry = try GarbageCollector(larder: larder).collect(options: .init(grace: .seconds(10), dryRun: true))
    #expect(try Fixture.snapshot(larder) == before)
    #expect(!FileManager.default.fileExists(atPath: "\(dir.path)/gc.lock"))

    #expect(dry.dryRun)
    #expect(dry.uploadsExpired == 2)
    #expect(dry.uploadBytesFreed == 1000)
    #expect(dry.filesReleased == 2)
    #expect(dry.blobsRemoved == 2)
    #expect(dry.blobBytesFreed == 21)
    #expect(dry.strayFilesRemoved == 2)
    #expect(dry.strayBytesFreed == Int64(strayContent.count + 33))
    #expect(dry.tempFilesRemoved == 1)
    #expect(dry.tempBytesFreed == 77)
    #expect(dry.bytesFreed == 1000 + 21 + Int64(strayContent.count + 33) + 77)

    var real = try GarbageCollector(larder: larder).collect(options: .init(grace: .seconds(10)))
    #expect(!real.dryRun)
    real.dryRun = true
    real.durationSeconds = dry.durationSeconds
    real.phaseSeconds = dry.phaseSeconds
    #expect(real == dry)
    #expect(FileManager.default.fileExists(atPath: victim.path))
    #expect(POSIX.listDirectory(uploads) == ["up2"])
    #expect(POSIX.listDirectory(larder.blobs.tmpDirectory.path) == ["fresh.part"])
    #expect(!FileManager.default.fileExists(atPath: strayPath))
    #expect(try Fixture.count(larder, "uploads") == 1)
    #expect(try Fixture.count(larder, "blobs") == 1)

    let afterFirst = try Fixture.snapshot(larder)
    let again = try GarbageCollector(larder: larder).collect(options: .init(grace: .seconds(10)))
    #expect(again.changedNothing)
    #expect(again.bytesFreed == 0 && again.batches == 0)
    #expect(try Fixture.snapshot(larder) == afterFirst)
    #expect(
      try larder.files.data(of: try larder.objects.get(bucket: "app", name: "kept").file) == Data("kept".utf8)
    )
  }

  @Test func uploadFilesWithoutARowAreCollectedOnceOld() throws {
    let dir = ScratchDirectory()
    let larder = try TestStore.open(at: dir.url)
    let uploads = larder.blobs.uploadsDirectory.path
    // A crash between creating an upload's file and committing its row leaves the file alone.
    try Data(repeating: 1, count: 100).write(to: URL(fileURLWithPath: "\(uploads)/orphan1"))
    Fixture.setAge("\(uploads)/orphan1", 3600)
    // A young one may be an upload being created right now.
    try Data(repeating: 2, count: 50).write(to: URL(fileURLWithPath: "\(uploads)/young"))
    // One with a row is the upload's own bytes.
    try larder.catalog.write { db in
      try db.execute(
        "INSERT INTO uploads(id, bucket, expires_at, created_at) VALUES ('live', 'b', ?, ?)",
        [Date().addingTimeInterval(3600), Date()])
    }
    try Data(repeating: 3, count: 70).write(to: URL(fileURLWithPath: "\(uploads)/live"))
    Fixture.setAge("\(uploads)/live", 3600)

    let dry = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero, dryRun: true))
    #expect(dry.tempFilesRemoved == 1)
    #expect(dry.tempBytesFreed == 100)
    #expect(Set(POSIX.listDirectory(uploads)) == ["orphan1", "young", "live"])
    let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(report.tempFilesRemoved == 1)
    #expect(report.tempBytesFreed == 100)
    #expect(Set(POSIX.listDirectory(uploads)) == ["young", "live"])
  }

  @Test func secondCollectorIsRefusedWhileOneRuns() throws {
    let dir = ScratchDirectory()
    let larder = try TestStore.open(at: dir.url)
    let other = try TestStore.open(at: dir.url)
    let tally = Tally()
    let lockPath = "\(larder.directory.path)/gc.lock"
    _ = try GarbageCollector(larder: larder).collect(
      options: .init(progress: { progress in
        guard progress.phase == .uploads else { return }
        do {
          _ = try GarbageCollector(larder: other).collect()
          tally.problem("second collector ran")
        } catch let error as MaintenanceError {
          if error == .collectorBusy(lockPath: lockPath) { tally.add("busy") }
        } catch { tally.problem("\(error)") }
        do {
          _ = try Verifier(larder: other).verify()
        } catch let error as MaintenanceError {
          if error.code == "collector-busy" { tally.add("busy") }
        } catch { tally.problem("\(error)") }
      }))
    #expect(tally["busy"] == 2)
    #expect(tally.allProblems == [])
    // Released afterwards.
    #expect(try GarbageCollector(larder: other).collect().changedNothing)
  }

  @Test func attachingDuringCollectionNeverPointsAtMissingBlob() throws {
    let dir = ScratchDirectory()
    let larder = try TestStore.open(at: dir.url)
    let collectorSide = try TestStore.open(at: dir.url)
    let contents = Fixture.contents(3, tag: "attach")
    var files: [File] = []
    for i in 0..<90 { files.append(try larder.files.put(contents[i % 3])) }
    try Fixture.age(larder, by: 60)
    let candidates = files
    let tally = Tally()
    let attaching = Mutex(true)
    Fixture.onThreads(2) { role in
      if role == 0 {
        for (index, file) in candidates.enumerated() {
          do {
            try larder.catalog.write { db in
              try db.execute(
                "INSERT INTO records(type, id, body, created_at, updated_at) VALUES ('Doc', ?, '{}', 0, 0)",
                ["\(index)"])
              try db.execute(
                "INSERT INTO attachments(record_type, record_id, property, position, file_id) VALUES ('Doc', ?, 'file', 0, ?)",
                ["\(index)", file.id])
            }
            tally.add("attached")
          } catch let error as DatabaseError where error.isForeignKeyViolation {
            tally.add("refused")
          } catch { tally.problem("attach: \(error)") }
        }
        attaching.withLock { $0 = false }
      } else {
        repeat {
          do {
            let report = try GarbageCollector(larder: collectorSide).collect(
              options: .init(grace: .zero, batchSize: 2))
            tally.add("released", report.filesReleased)
            tally.add("runs")
          } catch { tally.problem("gc: \(error)") }
        } while attaching.withLock { $0 }
      }
    }
    let last = try GarbageCollector(larder: collectorSide).collect(options: .init(grace: .zero))
    tally.add("released", last.filesReleased)
    #expect(tally.allProblems == [])
    #expect(tally["attached"] + tally["refused"] == 90)
    #expect(tally["released"] == 90 - tally["attached"])
    #expect(try Fixture.count(larder, "files") == tally["attached"])
    let attached = try larder.catalog.read { db in
      try db.rows("SELECT f.id, f.blob_sha256 FROM attachments a JOIN files f ON f.id = a.file_id")
    }
    #expect(attached.count == tally["attached"])
    for row in attached {
      let file = try #require(try larder.files.file(id: row.string("id") ?? ""))
      #expect(Fixture.sha256Hex(try larder.files.data(of: file)) == file.sha256)
    }
    let verify = try Verifier(larder: larder).verify()
    #expect(verify.isClean)
    #expect(verify.findings == [])
  }

  @Test func trashLeftoversGoBackOnlyWhenSafe() throws {
    let dir = ScratchDirectory()
    let larder = try TestStore.open(at: dir.url)
    let contents = Fixture.contents(3, tag: "trash")
    for (i, data) in contents.enumerated() {
      _ = try larder.objects.put(bucket: "b", name: "o\(i)", data: data)
    }
    let trash = larder.blobs.trashDirectory.path
    let hex = contents.map(Fixture.sha256Hex)
    // o0: moved to trash by a collection that then crashed before its commit.
    #expect(rename(Fixture.blobPath(larder, contents[0]), "\(trash)/\(hex[0])") == 0)
    // o1: a second copy in trash while the blob is in place (it was uploaded again since).
    try Data("not the content".utf8).write(to: URL(fileURLWithPath: "\(trash)/\(hex[1])"))
    // o2: a hostile symlink named like a blob, while the blob file is missing.
    let outside = dir.url.appendingPathComponent("outside")
    try contents[2].write(to: outside)
    let blob2 = Fixture.blobPath(larder, contents[2])
    #expect(chmod(blob2, 0o644) == 0)
    let saved = try Data(contentsOf: URL(fileURLWithPath: blob2))
    #expect(unlink(blob2) == 0)
    #expect(symlink(outside.path, "\(trash)/\(hex[2])") == 0)
    // An entry not named by a digest.
    try Data("x".utf8).write(to: URL(fileURLWithPath: "\(trash)/stray-1"))

    let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(report.trashRestored == 1)
    #expect(report.trashRemoved == 3)
    #expect(POSIX.listDirectory(trash) == [])
    #expect(try larder.files.data(of: try larder.objects.get(bucket: "b", name: "o0").file) == contents[0])
    #expect(try larder.files.data(of: try larder.objects.get(bucket: "b", name: "o1").file) == contents[1])
    var st = stat()
    #expect(lstat(blob2, &st) != 0)  // the symlink did not become the blob
    #expect(FileManager.default.fileExists(atPath: outside.path))
    let verify = try Verifier(larder: larder).verify()
    #expect(verify.counts == [.missingBlobFile: 1])
    #expect(verify.findings.first?.sha256 == hex[2])
    // Put the real bytes back: clean again.
    try saved.write(to: URL(fileURLWithPath: blob2))
    #expect(chmod(blob2, 0o444) == 0)
    #expect(try Verifier(larder: larder).verify().findings == [])
  }
}
