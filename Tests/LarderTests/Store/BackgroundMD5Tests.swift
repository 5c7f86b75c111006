import Foundation
import LarderCrypto
import LarderTestSupport
import Testing

@testable import Larder

/// MD5 off the upload's critical path: computed inline only to check a client's, at commit for
/// small content, otherwise after the commit by the background hasher (`MD5Backfill`), and at
/// once for a caller that needs it.
@Suite struct BackgroundMD5Tests {
  /// Just over the inline limit: committed without an MD5.
  static let large: [UInt8] = (0..<(Int(FileStore.inlineMD5Limit) + 4096)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }

  static func rowMD5(_ larder: Larder, _ sha256: String) throws -> [UInt8]?? {
    try larder.catalog.read { db in
      try db.row("SELECT md5 FROM blobs WHERE sha256 = ?", [Hex.decode(sha256)!]).map { $0.bytes("md5") }
    }
  }

  @Test func aLargeUploadCommitsWithoutMD5AndTheBackfillOfTheNextRunFillsIt() throws {
    let dir = ScratchDirectory("md5")
    let expected = Hex.encode(Digest.hash(.md5, Self.large))
    let sha: String
    do {
      let larder = try TestStore.open(at: dir.url, configuration: .init(backgroundMD5: false))
      #expect(larder.files.md5Backfill == nil)
      let object = try larder.objects.put(bucket: "b", name: "big", data: Data(Self.large))
      sha = object.file.sha256
      #expect(object.file.md5 == "")
      #expect(object.firebaseMetadata.md5Hash == nil)
      #expect(try Self.rowMD5(larder, sha) == .some(nil))
      #expect(try larder.objects.get(bucket: "b", name: "big").file.md5 == "")
      let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(object.firebaseMetadata)) as? [String: Any]
      #expect(json?["md5Hash"] == nil)
      #expect(json?["sha256"] as? String == sha)
    }
    // A restart: the table is the work list, and the pass at open finds it.
    let larder = try TestStore.open(at: dir.url)
    let backfill = try #require(larder.files.md5Backfill)
    try Self.waitForRow(larder, sha)
    backfill.waitUntilIdle()
    #expect(try Self.rowMD5(larder, sha) == .some(Hex.decode(expected)))
    let object = try larder.objects.get(bucket: "b", name: "big")
    #expect(object.file.md5 == expected)
    #expect(object.firebaseMetadata.md5Hash == Data(Hex.decode(expected)!).base64EncodedString())
    // `files.md5` keeps what the upload knew: nothing.
    let filesMD5 = try larder.catalog.read { try $0.row("SELECT md5 FROM files")?.bytes("md5") }
    #expect(filesMD5 == [])
    #expect(backfill.runPass() == 0)
  }

  /// A process must be able to end the worker before it exits (OpenSSL's atexit cleanup would
  /// otherwise pull the digest out from under a running pass): after `stop()` nothing runs, and
  /// nothing starts again.
  @Test func stopEndsTheWorkAndNoPassStartsAfterIt() throws {
    let dir = ScratchDirectory("md5-stop")
    var shas: [String] = []
    do {
      let larder = try TestStore.open(at: dir.url, configuration: .init(backgroundMD5: false))
      for i in 0..<3 {
        shas.append(try larder.objects.put(bucket: "b", name: "big\(i)", data: Data(Self.large + [UInt8(i)])).file.sha256)
      }
    }
    let larder = try TestStore.open(at: dir.url)
    let backfill = try #require(larder.files.md5Backfill)
    backfill.stop()
    #expect(!backfill.isRunning)
    let filledAtStop = try shas.filter { try Self.rowMD5(larder, $0) != .some(nil) }.count
    backfill.wake()
    _ = try larder.objects.put(bucket: "b", name: "more", data: Data(Self.large + [9]))
    usleep(200_000)
    #expect(!backfill.isRunning)
    #expect(try shas.filter { try Self.rowMD5(larder, $0) != .some(nil) }.count == filledAtStop)
  }

  static func waitForRow(_ larder: Larder, _ sha: String) throws {
    let deadline = Date().addingTimeInterval(30)
    while try rowMD5(larder, sha) == .some(nil), Date() < deadline { usleep(20_000) }
  }

  @Test func smallContentHasItsMD5AtCommit() throws {
    let larder = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    let limit = [UInt8](repeating: 7, count: Int(FileStore.inlineMD5Limit))
    let object = try larder.objects.put(bucket: "b", name: "limit", data: Data(limit))
    #expect(object.file.md5 == Hex.encode(Digest.hash(.md5, limit)))
    #expect(try Self.rowMD5(larder, object.file.sha256) == .some(Digest.hash(.md5, limit)))
    let empty = try larder.files.put(Data())
    #expect(empty.md5 == "d41d8cd98f00b204e9800998ecf8427e")
  }

  @Test func aGivenMD5IsVerifiedInlineAndRecordedAndAMismatchStoresNothing() throws {
    let larder = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    let md5 = Digest.hash(.md5, Self.large)
    var wrong = md5
    wrong[0] ^= 1
    #expect(
      throws: LarderError.checksumMismatch(algorithm: "md5", expected: Hex.encode(wrong), actual: Hex.encode(md5))
    ) {
      try larder.files.put(Data(Self.large), options: .init(expectedMD5: wrong))
    }
    let counts = try larder.catalog.read { db in
      try ["blobs", "files"].map { try db.row("SELECT count(*) AS n FROM \($0)")?.int("n") }
    }
    #expect(counts == [0, 0])
    #expect(try FileManager.default.contentsOfDirectory(atPath: larder.blobs.tmpDirectory.path) == [])
    let file = try larder.files.put(Data(Self.large), options: .init(expectedMD5: md5))
    #expect(file.md5 == Hex.encode(md5))
    #expect(try Self.rowMD5(larder, file.sha256) == .some(md5))
  }

  @Test func aVerifiedMD5FillsADeduplicatedBlobWithoutOne() throws {
    let larder = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    let first = try larder.files.put(Data(Self.large))
    #expect(try Self.rowMD5(larder, first.sha256) == .some(nil))
    let md5 = Digest.hash(.md5, Self.large)
    let second = try larder.files.put(Data(Self.large), options: .init(expectedMD5: md5))
    #expect(second.md5 == Hex.encode(md5))
    #expect(try larder.files.file(id: first.id)?.md5 == Hex.encode(md5))
    // And a later upload without one reads the recorded MD5.
    #expect(try larder.files.put(Data(Self.large)).md5 == Hex.encode(md5))
  }

  @Test func aCallerThatNeedsTheMD5GetsItAtOnceAndItIsRecorded() throws {
    let larder = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    let file = try larder.files.put(Data(Self.large))
    #expect(file.md5 == "")
    let known = try larder.files.withMD5(file)
    #expect(known.md5 == Hex.encode(Digest.hash(.md5, Self.large)))
    #expect(known.id == file.id && known.sha256 == file.sha256 && known.size == file.size)
    #expect(try Self.rowMD5(larder, file.sha256) == .some(Digest.hash(.md5, Self.large)))
    #expect(try larder.files.withMD5(known) == known)
    #expect(try larder.files.file(id: file.id) == known)
  }

  @Test func anAdmissionThatReadsTheMD5SeesIt() throws {
    struct Recorder: ObjectAdmission {
      let seen: Tally
      var readsMD5: Bool { true }
      func admit(_ incoming: IncomingObject, replacing current: StoredObject?) throws {
        seen.add("incoming:\(incoming.file.md5)")
        if let current { seen.add("current:\(current.file.md5)") }
      }
    }
    let larder = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    let seen = Tally()
    try larder.objects.put(bucket: "b", name: "o", data: Data(Self.large))
    let writer = try larder.files.makeWriter()
    try writer.write(Self.large + [1])
    try larder.objects.put(bucket: "b", name: "o", staged: writer.finish(), admission: Recorder(seen: seen))
    #expect(seen["incoming:\(Hex.encode(Digest.hash(.md5, Self.large + [1])))"] == 1)
    #expect(seen["current:\(Hex.encode(Digest.hash(.md5, Self.large)))"] == 1)
  }

  @Test func gcRemovingABlobWhileItIsHashedNeitherCrashesNorResurrectsIt() throws {
    let larder = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    let doomed = try larder.objects.put(bucket: "b", name: "doomed", data: Data(Self.large))
    let kept = try larder.objects.put(bucket: "b", name: "kept", data: Data(Self.large + [2]))
    try larder.objects.delete(bucket: "b", name: "doomed")
    let backfill = MD5Backfill(catalog: larder.catalog, content: larder.content)
    let sha = Hex.decode(doomed.file.sha256)!
    // The file is hashed (open), then gc removes row and file before the MD5 is recorded.
    let md5 = try backfill.fill(sha256: sha) {
      let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
      #expect(report.blobsRemoved == 1)
    }
    #expect(md5 == Digest.hash(.md5, Self.large))
    #expect(try Self.rowMD5(larder, doomed.file.sha256) == nil)
    #expect(!FileManager.default.fileExists(atPath: larder.blobs.path(for: sha)))
    // Gone before the hash starts: that blob is skipped, the pass goes on and ends.
    #expect(throws: LarderError.self) { try backfill.fill(sha256: sha) }
    try larder.catalog.write { db in
      try db.execute("INSERT INTO blobs(sha256, size, created_at) VALUES (?, 1, 0)", [sha])
    }
    #expect(backfill.runPass() == 1)
    #expect(try Self.rowMD5(larder, doomed.file.sha256) == .some(nil))
    #expect(try Self.rowMD5(larder, kept.file.sha256) == .some(Digest.hash(.md5, Self.large + [2])))
  }

  @Test(TestCatalog.sqliteOnly) func verifyChecksAKnownMD5AndRepairsByForgettingIt() throws {
    let dir = ScratchDirectory("md5")
    let larder = try TestStore.open(at: dir.url, configuration: .init(backgroundMD5: false))
    let small = try larder.files.put(Data("small".utf8))
    let big = try larder.files.put(Data(Self.large))
    var report = try Verifier(larder: larder).verify()
    #expect(report.isClean)
    let sha = Hex.decode(small.sha256)!
    try larder.catalog.write { db in
      try db.execute("UPDATE blobs SET md5 = zeroblob(16) WHERE sha256 = ?", [sha])
    }
    report = try Verifier(larder: larder).verify(repair: true)
    #expect(report.findings.map(\.kind) == [.md5Mismatch])
    #expect(report.findings.first?.sha256 == small.sha256)
    #expect(report.findings.first?.repaired == true)
    #expect(try Self.rowMD5(larder, small.sha256) == .some(nil))
    #expect(try Self.rowMD5(larder, big.sha256) == .some(nil))
    #expect(MD5Backfill(catalog: larder.catalog, content: larder.content).runPass() == 2)
    #expect(try larder.files.file(id: small.id)?.md5 == Hex.encode(Digest.hash(.md5, Array("small".utf8))))
    #expect(try Verifier(larder: larder).verify().isClean)
  }

  @Test(TestCatalog.sqliteOnly) func migrationFiveMovesTheFilesMD5OntoTheirBlobs() throws {
    let dir = ScratchDirectory("md5")
    let md5: String
    do {
      let larder = try TestStore.open(at: dir.url)
      md5 = try larder.files.put(Data("old content".utf8)).md5
    }
    do {
      // Back to version 4: no `blobs.md5`, the MD5 only on the file row.
      let db = try SQLiteDatabase(path: dir.url.appendingPathComponent("larder.sqlite").path)
      try db.executeScript(
        """
        DROP TABLE event_deliveries;
        DROP TABLE object_events;
        DROP TABLE event_subscriptions;
        DROP TABLE snapshot_pins;
        DROP TABLE service_account_assertions;
        DROP TABLE model_reference_rules;
        DROP TABLE model_links;
        DROP TABLE model_references;
        DROP TABLE derived_files;
        DROP INDEX blobs_without_crc32c;
        ALTER TABLE blobs DROP COLUMN crc32c;
        DROP INDEX blobs_without_md5;
        ALTER TABLE blobs DROP COLUMN md5;
        ALTER TABLE uploads DROP COLUMN shared_state;
        ALTER TABLE uploads DROP COLUMN lease_holder;
        ALTER TABLE uploads DROP COLUMN lease_until;
        ALTER TABLE uploads DROP COLUMN lease_epoch;
        DROP TABLE service_account_keys;
        ALTER TABLE blobs DROP COLUMN fence;
        DROP TABLE blob_deletions;
        DROP TABLE blob_fences;
        PRAGMA user_version = 4;
        """)
    }
    let larder = try TestStore.open(at: dir.url, configuration: .init(backgroundMD5: false))
    let version = try larder.catalog.read { try $0.row("PRAGMA user_version")?.int("user_version") }
    #expect(version == Int64(Larder.catalogSchemaVersion))
    // Every later migration ran too: migration 6's columns, dropped above, are back.
    #expect(throws: Never.self) {
      try larder.catalog.read { try $0.rows("SELECT shared_state, lease_holder, lease_until FROM uploads LIMIT 0") }
    }
    // Migration 7: the existing blob keeps fence 0 (its key unchanged); fences start at 1.
    let fences = try larder.catalog.read { db in
      (
        try db.rows("SELECT fence FROM blobs").map { $0.int("fence") },
        try db.rows("SELECT name, fence FROM blob_fences ORDER BY name").map { "\($0.string("name") ?? "")=\($0.int("fence") ?? -1)" }
      )
    }
    #expect(fences.0 == [0])
    #expect(fences.1 == ["counter=0", "floor=1", "mark=0"])
    let file = try #require(try larder.catalog.read { try $0.row("SELECT \(File.columns) FROM files f") }.map(File.init(row:)))
    #expect(file.md5 == md5)
    #expect(md5 == Hex.encode(Digest.hash(.md5, Array("old content".utf8))))
    let pending = try larder.catalog.read { try $0.row("SELECT count(*) AS n FROM blobs WHERE md5 IS NULL")?.int("n") }
    #expect(pending == 0)
  }
}
