import Foundation
import Larder
import LarderTestSupport
import Testing

private struct BackedUpOwner: Model, Equatable {
  var id: String
  var name: String
  var avatar: File?
}

private struct BackedUpPet: Model, Equatable {
  var id: String
  var ownerID: String
  var photos: [File] = []
  static let references = [ModelReference("ownerID", to: BackedUpOwner.self, onDelete: .cascade)]
}

/// `larder backup`, `backup list|verify|prune` and `restore` as real processes on real
/// directories, on every catalog and blob store of the run: SQLite and files (the first pass),
/// PostgreSQL (`LARDER_TEST_CATALOG`), PostgreSQL and S3 (the S3 pass); a restore goes into
/// the same kind of store the test's data directory opens.
@Suite struct BackupCommandTests {

  /// Seeds `count` objects through the library (fast); returns name → bytes.
  static func seed(_ box: Sandbox, count: Int, prefix: String = "o", size: Int = 3_000) throws -> [String:
    [UInt8]]
  {
    let larder = try TestStore.open(at: box.data)
    var written: [String: [UInt8]] = [:]
    for i in 0..<count {
      let bytes = pseudoRandomBytes(size + i, seed: UInt64(i + prefix.utf8.count * 1000))
      _ = try larder.objects.put(
        bucket: "b", name: "\(prefix)\(i)", data: Data(bytes),
        options: .init(declaredContentType: "application/x-test", metadata: ["n": "\(i)", "k": "v \(i)"]))
      written["\(prefix)\(i)"] = bytes
    }
    return written
  }

  static func stat(_ box: Sandbox, _ name: String) throws -> RunResult {
    try box.larder("stat", "b/\(name)", "--json")
  }

  static func blobFiles(under root: String) -> [String] {
    (FileManager.default.enumerator(atPath: "\(root)/blobs/sha256")?.allObjects as? [String] ?? []).filter {
      $0.split(separator: "/").count == 3
    }.map { String($0.split(separator: "/").last!) }.sorted()
  }

  @Test func backupWhileClientsWriteAndGCLoopsRestoresEveryAcknowledgedObject() throws {
    let box = try Sandbox()
    let stable = try Self.seed(box, count: 60, prefix: "s")
    _ = try Self.seed(box, count: 40, prefix: "c")
    let before = try Dictionary(uniqueKeysWithValues: stable.keys.map { ($0, try Self.stat(box, $0).stdout) })
    let dest = box.path("dest")

    // 8 clients overwrite and delete the churn objects and add new ones; gc --grace 0s loops.
    let stop = Locked(false)
    let failures = Locked<[String]>([])
    // Objects the clients never touch again once acknowledged: name, seed, when.
    let acknowledged = Locked<[(String, Int, ContinuousClock.Instant)]>([])
    let larder = try TestStore.open(at: box.data)
    let clients = (0..<8).map { client in
      Thread {
        var round = 0
        while !stop.value {
          do {
            let i = (round * 8 + client) % 40
            if round % 3 == 0 {
              try? larder.objects.delete(bucket: "b", name: "c\(i)")
            } else {
              _ = try larder.objects.put(
                bucket: "b", name: "c\(i)",
                data: Data(pseudoRandomBytes(2_000 + round, seed: UInt64(round * 7 + client))))
            }
            _ = try larder.objects.put(
              bucket: "b", name: "n\(client)-\(round)",
              data: Data(pseudoRandomBytes(500, seed: UInt64(round))))
            acknowledged.mutate { $0.append(("n\(client)-\(round)", round, ContinuousClock.now)) }
          } catch {
            failures.mutate { $0.append("\(error)") }
          }
          round += 1
        }
      }
    }
    let dataPath = box.dataPath
    let collector = Thread {
      while !stop.value {
        if let gc = try? CLI.larder(["gc", "--data", dataPath, "--grace", "0s"]), gc.status != 0 {
          failures.mutate { $0.append("gc: \(gc)") }
        }
      }
    }
    for thread in clients + [collector] { thread.start() }
    Thread.sleep(forTimeInterval: 0.5)
    let backupStarted = ContinuousClock.now
    let backup = try box.larder("backup", dest)
    Thread.sleep(forTimeInterval: 0.5)
    stop.mutate { $0 = true }
    Thread.sleep(forTimeInterval: 1)
    #expect(failures.value.isEmpty, "\(failures.value.prefix(3))")
    #expect(backup.status == 0, "\(backup)")
    #expect(backup.stdout.hasPrefix("snapshot "), "\(backup)")
    #expect(backup.stdout.contains(" copied "), "\(backup)")

    let listed = try CLI.larder(["backup", "list", dest, "--json"])
    let snapshots = try listed.json() as? [[String: Any]] ?? []
    #expect(snapshots.count == 1)
    let id = snapshots.first?["id"] as? String ?? ""
    #expect(backup.stdout.hasPrefix("snapshot \(id):"))
    let deep = try CLI.larder(["backup", "verify", dest, "--deep"])
    #expect(deep.status == 0, "\(deep)")
    #expect(deep.stdout == "checked 1 snapshots deeply: 0 damaged\n")

    let restored = try Sandbox()
    let restore = try restored.larder("restore", dest)
    #expect(restore.status == 0, "\(restore)")
    #expect(restore.stdout.hasPrefix("restored snapshot \(id) of store "), "\(restore)")
    for (name, bytes) in stable {
      let out = restored.path("got-\(name)")
      let get = try restored.larder("get", "b/\(name)", "--output", out)
      #expect(get.status == 0, "\(get)")
      #expect(restored.read("got-\(name)") == bytes, "\(name)")
      #expect(try Self.stat(restored, name).stdout == before[name], "\(name)")
    }
    let acked = acknowledged.value.filter { $0.2 < backupStarted }
    #expect(!acked.isEmpty)
    for (name, seed, _) in acked {
      let get = try restored.larder("get", "b/\(name)", "--output", restored.path("ack"))
      #expect(get.status == 0, "\(name): \(get)")
      #expect(restored.read("ack") == pseudoRandomBytes(500, seed: UInt64(seed)), "\(name)")
    }
    // Every object of the snapshot is served whole (churn included), and the store is sound.
    let listing = try restored.larder("ls", "b", "--recursive", "--json").jsonObject()
    let names = (listing["items"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
    #expect(names.count == (snapshots.first?["objects"] as? Int))
    for name in names where !name.hasPrefix("s") {
      #expect(try restored.larder("get", "b/\(name)", "--output", restored.path("x")).status == 0, "\(name)")
    }
    let verify = try restored.larder("verify")
    #expect(verify.status == 0, "\(verify)")
    #expect(try Sandbox.count(TestStore.open(at: restored.data), "snapshot_pins") == 0)
  }

  @Test func restoredStoreServesModelsAndTheirAttachments() throws {
    let box = try Sandbox()
    let larder = try TestStore.open(at: box.data)
    let face = try larder.files.put(Data("face".utf8))
    let cat = try larder.files.put(Data("cat".utf8))
    try larder.write { tx in
      try tx.save(BackedUpOwner(id: "o1", name: "Ada", avatar: face))
      try tx.save(BackedUpPet(id: "p1", ownerID: "o1", photos: [cat, face]))
    }
    let dest = box.path("dest")
    #expect(try box.larder("backup", dest).status == 0)
    let restored = try Sandbox()
    #expect(try restored.larder("restore", dest).status == 0)
    let copy = try TestStore.open(at: restored.data)
    #expect(
      try copy.models.find(BackedUpOwner.self, id: "o1") == BackedUpOwner(id: "o1", name: "Ada", avatar: face)
    )
    #expect(
      try copy.models.find(BackedUpPet.self, id: "p1")
        == BackedUpPet(id: "p1", ownerID: "o1", photos: [cat, face]))
    #expect(
      try Set(copy.models.attachments(of: BackedUpPet.self, id: "p1").map(\.fileID)) == [cat.id, face.id])
    // The attachments keep their files through a collection, and the store is sound.
    #expect(try restored.larder("gc", "--grace", "0s").status == 0)
    #expect(try Sandbox.count(copy, "files") == 2)
    #expect(try restored.larder("verify").status == 0)
  }

  /// A pin stops the collector from removing blobs, and only while it is live.
  @Test func gcRemovesNoBlobWhileASnapshotPinIsLive() throws {
    let box = try Sandbox()
    _ = try Self.seed(box, count: 3)
    let larder = try TestStore.open(at: box.data)
    let pins = SnapshotPins(catalog: larder.catalog)
    try pins.pin("test-pin")
    try larder.objects.delete(bucket: "b", name: "o1")
    let pinned = try box.larder("gc", "--grace", "0s", "--json").jsonObject()
    #expect(pinned["filesReleased"] as? Int == 1)
    #expect(pinned["blobsRemoved"] as? Int == 0)
    #expect(try Sandbox.blobRows(larder).count == 3)
    if !TestBlobs.isS3 { #expect(box.blobFileNames.count == 3) }
    let said = try box.larder("gc", "--grace", "0s")
    #expect(
      said.stdout.contains(
        "blobs kept:        a backup is copying (snapshot test-pin): no blob is removed until it ends\n"), "\(said)")
    try pins.release("test-pin")
    let free = try box.larder("gc", "--grace", "0s", "--json").jsonObject()
    #expect(free["blobsRemoved"] as? Int == 1)
    #expect(try Sandbox.blobRows(larder).count == 2)
  }

  @Test func killedBackupIsNeverListedAndTheNextRunCopiesOnlyWhatWasMissing() throws {
    let box = try Sandbox()
    _ = try Self.seed(box, count: 40)
    let dest = box.path("dest")
    let crashed = try box.larder("backup", dest, environment: ["LARDER_CRASH_AT": "backup-mid-copy"])
    #expect(crashed.status == CrashTests.crashStatus, "\(crashed)")
    let copied = Self.blobFiles(under: dest)
    #expect(copied.count == 20)
    #expect(try CLI.larder(["backup", "list", dest]).stdout == "")
    #expect(try CLI.larder(["backup", "verify", dest]).stderr.contains("no complete snapshot"))
    // The dead backup's pin holds until its lease ends: gc frees no blob meanwhile.
    try TestStore.open(at: box.data).objects.delete(bucket: "b", name: "o0")
    let gc = try box.larder("gc", "--grace", "0s", "--json").jsonObject()
    #expect(gc["blobsRemoved"] as? Int == 0)

    let second = try box.larder("backup", dest)
    #expect(second.status == 0, "\(second)")
    let manifest = try CLI.larder(["backup", "list", dest, "--json"]).json() as? [[String: Any]] ?? []
    #expect(manifest.count == 1)
    // o0's file is gone but its blob is kept by the dead pin: 40 blob rows, 20 already there.
    #expect(manifest.first?["blobs"] as? Int == 40)
    #expect(manifest.first?["copiedBlobs"] as? Int == 20)
    #expect(manifest.first?["objects"] as? Int == 39)
    #expect(try FileManager.default.contentsOfDirectory(atPath: "\(dest)/snapshots").count == 1)
    #expect(try FileManager.default.contentsOfDirectory(atPath: "\(dest)/tmp") == [])
  }

  /// A backup into a directory looks only at the blobs the newest complete snapshot does not
  /// reference with the same size: those it trusts to be in DEST (a blob removed behind its
  /// back is not copied again, and verify names it), unless that snapshot's catalog does not
  /// match its manifest; then every blob is looked at again.
  @Test func incrementalBackupTrustsTheNewestCompleteSnapshot() throws {
    let box = try Sandbox()
    let objects = try Self.seed(box, count: 5)
    let dest = box.path("dest")
    #expect(try box.larder("backup", dest).status == 0)
    _ = try TestStore.open(at: box.data).objects.put(bucket: "b", name: "new", data: Data("new content".utf8))
    let sha = try CLI.opensslSHA256(box.write("o1", objects["o1"]!))
    let path = "\(dest)/blobs/sha256/\(sha.prefix(2))/\(sha.dropFirst(2).prefix(2))/\(sha)"
    try FileManager.default.removeItem(atPath: path)
    let second = try box.larder("backup", dest)
    #expect(second.stdout.contains("6 objects, 6 blobs ("), "\(second)")
    #expect(second.stdout.contains("; copied 1 blobs (11 B)"), "\(second)")
    #expect(!FileManager.default.fileExists(atPath: path))
    let verify = try CLI.larder(["backup", "verify", dest])
    #expect(verify.status == 1)
    #expect(verify.stdout.components(separatedBy: "  \(sha)  missing (").count == 3, "\(verify)")

    let manifests = try CLI.larder(["backup", "list", dest, "--json"]).json() as? [[String: Any]] ?? []
    let newest = try #require(manifests.last?["id"] as? String)
    let catalog = URL(fileURLWithPath: "\(dest)/snapshots/\(newest)/catalog.sqlite")
    try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: catalog.path)
    var bytes = try Data(contentsOf: catalog)
    bytes[bytes.count - 1] ^= 0xFF
    try bytes.write(to: catalog)
    let third = try box.larder("backup", dest)
    #expect(third.stdout.contains("; copied 1 blobs ("), "\(third)")
    #expect(FileManager.default.fileExists(atPath: path))
  }

  @Test func deepVerifyNamesACorruptedBlobAndRestoreRefusesIt() throws {
    let box = try Sandbox()
    let objects = try Self.seed(box, count: 4)
    let dest = box.path("dest")
    #expect(try box.larder("backup", dest).status == 0)
    let sha = try CLI.opensslSHA256(box.write("o2", objects["o2"]!))
    let path = "\(dest)/blobs/sha256/\(sha.prefix(2))/\(sha.dropFirst(2).prefix(2))/\(sha)"
    var bytes = try #require(FileManager.default.contents(atPath: path))
    bytes[100] ^= 0xFF
    try bytes.write(to: URL(fileURLWithPath: path))
    let id =
      (try CLI.larder(["backup", "list", dest, "--json"]).json() as? [[String: Any]])?.first?["id"] as? String
      ?? "?"

    let shallow = try CLI.larder(["backup", "verify", dest])
    #expect(shallow.status == 0, "\(shallow)")
    let deep = try CLI.larder(["backup", "verify", dest, "--deep"])
    #expect(deep.status == 1)
    let lines = deep.stdout.split(separator: "\n").map(String.init)
    #expect(lines.count == 2, "\(deep)")
    #expect(lines.first?.hasPrefix("\(id)  \(sha)  its bytes hash to ") == true, "\(deep)")
    #expect(lines.first?.hasSuffix("  (b/o2)") == true, "\(deep)")
    #expect(lines.last == "checked 1 snapshots deeply: 1 damaged")

    let target = try Sandbox()
    let restore = try target.larder("restore", dest)
    #expect(restore.status == 1)
    #expect(
      restore.stderr.contains("its bytes hash to") || restore.stderr.contains("read back as"), "\(restore)")
    #expect(!FileManager.default.fileExists(atPath: target.data.appendingPathComponent("larder.sqlite").path))
  }

  /// A restore writes only into its targets: the target's content store (S3 in the S3 pass)
  /// is opened over the restored catalog staged in the data directory, not over a scratch
  /// store in the temporary directory.
  @Test func restoreNeedsNoTemporaryDirectory() throws {
    let box = try Sandbox()
    let objects = try Self.seed(box, count: 3)
    let dest = box.path("dest")
    #expect(try box.larder("backup", dest).status == 0)
    let restored = try Sandbox()
    let restore = try restored.larder("restore", dest, environment: ["TMPDIR": box.path("no-such-tmp")])
    #expect(restore.status == 0, "\(restore)")
    #expect(!FileManager.default.fileExists(atPath: box.path("no-such-tmp")))
    let get = try restored.larder("get", "b/o2", "--output", restored.path("o2"))
    #expect(get.status == 0, "\(get)")
    #expect(restored.read("o2") == objects["o2"])
    #expect(try FileManager.default.contentsOfDirectory(atPath: restored.data.appendingPathComponent("tmp").path) == [])
  }

  @Test func restoreRefusesANonEmptyStoreAndChangesNothing() throws {
    let box = try Sandbox()
    _ = try Self.seed(box, count: 3)
    let dest = box.path("dest")
    #expect(try box.larder("backup", dest).status == 0)
    let other = try Sandbox()
    try other.put("bkt/mine", Array("mine".utf8))
    let before = try FileManager.default.contentsOfDirectory(atPath: other.dataPath).sorted()
    let sqlite = FileManager.default.contents(atPath: other.data.appendingPathComponent("larder.sqlite").path)
    let refused = try other.larder("restore", dest)
    #expect(refused.status == 1)
    #expect(
      refused.stderr.hasPrefix("larder: error: \(other.dataPath) is not empty (it holds "), "\(refused)")
    #expect(refused.stderr.hasSuffix("): restore only into an empty store\n"), "\(refused)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: other.dataPath).sorted() == before)
    #expect(
      FileManager.default.contents(atPath: other.data.appendingPathComponent("larder.sqlite").path) == sqlite)
    #expect(try other.larder("stat", "bkt/mine").status == 0)
    #expect(try other.larder("stat", "b/o1").status == 1)
  }

  @Test func badInputIsAClearErrorAndChangesNothing() throws {
    let box = try Sandbox()
    _ = try Self.seed(box, count: 2)
    // A destination under a regular file cannot be made.
    let file = try box.write("plain", [1, 2, 3])
    let unwritable = try box.larder("backup", "\(file)/dest")
    #expect(unwritable.status == 1)
    #expect(
      unwritable.stderr.hasPrefix("larder: error: cannot write the backup destination \(file)/dest: "),
      "\(unwritable)")

    let dest = box.path("dest")
    #expect(try box.larder("backup", dest).status == 0)
    let unknown = try Sandbox().larder("restore", dest, "--snapshot", "20260101T000000.000Z-00000000")
    #expect(unknown.status == 1)
    #expect(
      unknown.stderr
        == "larder: error: no complete snapshot 20260101T000000.000Z-00000000 in \(dest) (see larder backup list)\n"
    )
    let unknownVerify = try CLI.larder(["backup", "verify", dest, "--snapshot", "nope"])
    #expect(unknownVerify.status == 1)

    // Another store's backups are not mixed in unless asked.
    let other = try Sandbox()
    _ = try Self.seed(other, count: 1, prefix: "x")
    let mixed = try other.larder("backup", dest)
    #expect(mixed.status == 1)
    #expect(mixed.stderr.contains("holds the backups of store "), "\(mixed)")
    #expect(mixed.stderr.hasSuffix("pass --force to add this store's snapshots beside them\n"), "\(mixed)")
    #expect(try CLI.larder(["backup", "list", dest]).stdout.split(separator: "\n").count == 1)
    #expect(try other.larder("backup", dest, "--force").status == 0)
    #expect(try CLI.larder(["backup", "list", dest]).stdout.split(separator: "\n").count == 2)

    let s3 = try box.larder("backup", "s3://bucket?prefix=Not/ok", environment: ["AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"])
    #expect(s3.status == 2)
    #expect(s3.stderr.contains("DEST: prefix must be 1 to 63 of a-z, 0-9, _ and - (or several, joined by /), got 'Not/ok'"), "\(s3)")
  }

  /// A snapshot restores into the embedded store (SQLite, files) whatever it was taken from:
  /// in the PostgreSQL pass the snapshot file was copied out of one REPEATABLE READ
  /// transaction, in the S3 pass the rows name fenced S3 addresses, which the filesystem keeps at 0.
  @Test func snapshotRestoresIntoSQLiteAndFilesWhateverTheSourceStore() throws {
    let box = try Sandbox()
    let objects = try Self.seed(box, count: 12)
    let dest = box.path("dest")
    let backup = try box.larder("backup", dest)
    #expect(backup.status == 0, "\(backup)")
    let manifest = try #require((try CLI.larder(["backup", "list", dest, "--json"]).json() as? [[String: Any]])?.first)
    #expect(manifest["catalogFormat"] as? String == "sqlite")
    #expect(manifest["schemaVersion"] as? Int == Larder.catalogSchemaVersion)
    #expect(manifest["objects"] as? Int == 12)

    let target = try Sandbox()
    let embedded = ["LARDER_CATALOG": "", "LARDER_BLOBS": ""]
    let restore = try CLI.larder(["restore", dest, "--data", target.dataPath], environment: embedded)
    #expect(restore.status == 0, "\(restore)")
    #expect(FileManager.default.fileExists(atPath: target.data.appendingPathComponent("larder.sqlite").path))
    #expect(Self.blobFiles(under: target.dataPath).count == 12)
    for (name, bytes) in objects {
      let get = try CLI.larder(
        ["get", "b/\(name)", "--output", target.path(name), "--data", target.dataPath], environment: embedded)
      #expect(get.status == 0, "\(get)")
      #expect(target.read(name) == bytes, "\(name)")
    }
    let stat = try CLI.larder(["stat", "b/o3", "--json", "--data", target.dataPath], environment: embedded)
    #expect(try stat.jsonObject()["metadata"] as? [String: String] == ["n": "3", "k": "v 3"], "\(stat)")
    let verify = try CLI.larder(["verify", "--data", target.dataPath], environment: embedded)
    #expect(verify.status == 0, "\(verify)")
    // New uploads get fences past every one the snapshot's rows hold.
    let put = try CLI.larder(
      ["put", try target.write("new", Array("new".utf8)), "b/new", "--data", target.dataPath], environment: embedded)
    #expect(put.status == 0, "\(put)")
  }

  /// A PostgreSQL catalog or an S3 prefix that holds a store is refused as a restore target,
  /// before anything is written there.
  @Test(.enabled(if: TestCatalog.isPostgres, "restores into PostgreSQL or S3 (the PostgreSQL and S3 passes)"))
  func restoreRefusesACatalogOrBucketThatHoldsAStore() throws {
    let box = try Sandbox()
    _ = try Self.seed(box, count: 2)
    let dest = box.path("dest")
    #expect(try box.larder("backup", dest).status == 0)
    let occupied = TestStore.processEnvironment(for: box.data)
    let fresh = try Sandbox()
    let intoCatalog = try CLI.larder(
      ["restore", dest, "--data", fresh.dataPath], environment: ["LARDER_CATALOG": occupied["LARDER_CATALOG"] ?? ""])
    #expect(intoCatalog.status == 1)
    #expect(intoCatalog.stderr.contains(" is not empty (it holds a store identity)"), "\(intoCatalog)")
    if let bucket = occupied["LARDER_BLOBS"] {
      let other = try Sandbox()
      let intoBucket = try CLI.larder(
        ["restore", dest, "--data", other.dataPath], environment: ["LARDER_BLOBS": bucket])
      #expect(intoBucket.status == 1)
      #expect(intoBucket.stderr.contains(" is not empty (it holds "), "\(intoBucket)")
      #expect(try CLI.larder(["stat", "b/o0", "--data", other.dataPath]).status == 1)
    }
    // The source store is untouched, and a fresh target takes the restore.
    #expect(try box.larder("verify").status == 0)
    #expect((try? FileManager.default.contentsOfDirectory(atPath: fresh.dataPath)) ?? [] == [])
    let restore = try fresh.larder("restore", dest)
    #expect(restore.status == 0, "\(restore)")
    #expect(try fresh.larder("stat", "b/o1").status == 0)
  }

  /// On PostgreSQL writers commit side by side: a pin waits for every collector transaction
  /// that already ran its deleting statement (and so did not see the pin), so none of their
  /// deletions commits after the backup's snapshot is taken.
  @Test(.enabled(if: TestCatalog.isPostgres, "PostgreSQL's concurrent writers (the PostgreSQL pass)"))
  func pinWaitsForACollectorTransactionThatMissedIt() throws {
    let larder = try TestStore.temporary()
    // A transaction that has read the pins (as the collector's DELETE does) and not ended.
    let readPins = DispatchSemaphore(value: 0)
    let end = DispatchSemaphore(value: 0)
    let collector = Thread {
      try? larder.catalog.read { db in
        _ = try db.rows("SELECT count(*) AS n FROM blobs WHERE NOT EXISTS (SELECT 1 FROM snapshot_pins)")
        readPins.signal()
        end.wait()
      }
    }
    collector.start()
    readPins.wait()
    let pinned = Locked(false)
    let pinner = Thread {
      try? SnapshotPins(catalog: larder.catalog).pin("waiting-pin")
      pinned.mutate { $0 = true }
    }
    pinner.start()
    Thread.sleep(forTimeInterval: 1)
    #expect(!pinned.value)
    end.signal()
    let deadline = Date().addingTimeInterval(30)
    while !pinned.value && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
    #expect(pinned.value)
    #expect(try SnapshotPins(catalog: larder.catalog).live() == ["waiting-pin"])
  }

  @Test func pruneKeepsTheNewestSnapshotsAndOnlyTheirBlobs() throws {
    let box = try Sandbox()
    _ = try Self.seed(box, count: 3)
    let dest = box.path("dest")
    #expect(try box.larder("backup", dest).status == 0)
    let larder = try TestStore.open(at: box.data)
    try larder.objects.delete(bucket: "b", name: "o0")
    _ = try larder.objects.put(bucket: "b", name: "new", data: Data("new content".utf8))
    #expect(try box.larder("gc", "--grace", "0s").status == 0)
    let second = try box.larder("backup", dest)
    #expect(second.status == 0, "\(second)")
    #expect(second.stdout.contains("copied 1 blobs"), "\(second)")
    #expect(Self.blobFiles(under: dest).count == 4)

    let prune = try CLI.larder(["backup", "prune", dest, "--keep", "1"])
    #expect(prune.status == 0, "\(prune)")
    #expect(prune.stdout.hasPrefix("removed 1 snapshots and 1 blobs ("), "\(prune)")
    #expect(try Self.blobFiles(under: dest) == Sandbox.blobRows(larder))
    // The newest is kept, even when both were taken within one second.
    let secondID = second.stdout.dropFirst("snapshot ".count).prefix { $0 != ":" }
    let kept = try CLI.larder(["backup", "list", dest, "--json"]).json() as? [[String: Any]] ?? []
    #expect(kept.compactMap { $0["id"] as? String } == [String(secondID)])
    #expect(try CLI.larder(["backup", "verify", dest, "--deep"]).status == 0)
    #expect(try CLI.larder(["backup", "prune", dest, "--keep", "0"]).status == 2)
  }
}

/// A value shared with threads.
final class Locked<Value>: @unchecked Sendable {
  private let lock = NSLock()
  private var stored: Value
  init(_ value: Value) { stored = value }
  var value: Value { lock.withLock { stored } }
  func mutate(_ body: (inout Value) -> Void) { lock.withLock { body(&stored) } }
}
