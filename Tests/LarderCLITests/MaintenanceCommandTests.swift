import Foundation
import LarderTestSupport
import Larder
import Testing

/// `larder gc` and `larder verify` through the binary.
@Suite struct MaintenanceCommandTests {
  @Test func dryRunChangesNothingAndPredictsTheRealCollection() throws {
    let fixture = try CrashTests.GCFixture()
    let box = fixture.box
    let listingBefore = try box.larder("ls", "bkt", "--recursive", "--json")
    let filesBefore = box.files(under: "blobs")
    #expect(filesBefore.count == 7)
    let rowsBefore: (Int64, Int64) = try {
      let larder = try TestStore.open(at: box.data)
      return (try Sandbox.count(larder, "files"), try Sandbox.count(larder, "blobs"))
    }()
    #expect(rowsBefore == (8, 7))

    let dry = try box.larder("gc", "--dry-run", "--grace", "0s", "--json")
    #expect(dry.status == 0, "\(dry)")
    let predicted = try dry.jsonObject()
    #expect(predicted["dryRun"] as? Bool == true)
    #expect(predicted["filesReleased"] as? Int == 5)  // four orphans and the removed duplicate
    #expect(predicted["blobsRemoved"] as? Int == 4)  // the duplicate's bytes are still live-0's
    #expect(predicted["blobBytesFreed"] as? Int == fixture.orphanBytes)
    #expect(predicted["strayFilesRemoved"] as? Int == 0)

    // Nothing changed: same listing, same files, same rows; a text dry run says so too.
    let text = try box.larder("gc", "--dry-run", "--grace=0s")
    #expect(text.status == 0)
    #expect(
      text.stdoutLines.contains("unused files:      5 would be deleted (nothing refers to them, uploaded more than 0 s ago)"),
      "\(text.stdout)")
    #expect(text.stdoutLines.last?.hasSuffix("(dry run: nothing changed)") == true)
    #expect(try box.larder("ls", "bkt", "--recursive", "--json").stdout == listingBefore.stdout)
    #expect(box.files(under: "blobs") == filesBefore)
    do {
      let larder = try TestStore.open(at: box.data)
      #expect(try Sandbox.count(larder, "files") == 8)
      #expect(try Sandbox.count(larder, "blobs") == 7)
    }

    // The real collection does what the dry run said.
    let real = try box.larder("gc", "--grace", "0s", "--json")
    #expect(real.status == 0, "\(real)")
    let done = try real.jsonObject()
    #expect(done["dryRun"] as? Bool == false)
    for key in ["filesReleased", "blobsRemoved", "blobBytesFreed", "strayFilesRemoved", "uploadsExpired"] {
      #expect(done[key] as? Int == predicted[key] as? Int, "\(key)")
    }
    #expect(done["bytesFreed"] as? Int == fixture.orphanBytes)
    #expect(box.blobFileNames.count == 3)
    #expect(Set(box.blobFileNames).isDisjoint(with: fixture.orphanSHAs))
    #expect(try box.larder("ls", "bkt", "--recursive", "--json").stdout == listingBefore.stdout)
    try fixture.expectLiveIntact()

    // A second collection finds nothing.
    let second = try box.larder("gc", "--grace", "0s", "--json").jsonObject()
    for key in [
      "filesReleased", "blobsRemoved", "blobBytesFreed", "strayFilesRemoved", "tempFilesRemoved",
      "uploadsExpired", "bytesFreed", "trashRestored", "trashRemoved",
    ] {
      #expect(second[key] as? Int == 0, "\(key)")
    }
    let secondText = try box.larder("gc", "--grace", "0s")
    #expect(secondText.stdoutLines.contains("content removed:   0 (0 B) no file uses any more"), "\(secondText.stdout)")
  }

  /// Every entry under the data directory with its kind, mode and (for files) SHA-256, and, on
  /// PostgreSQL, every table's rows as read through a read-only store. SQLite's `-shm` is left
  /// out: it is the WAL's shared-memory index, which every reader writes its read marks into;
  /// and an empty `-wal` counts as none (a read-only connection creates it when absent: it
  /// holds nothing).
  private func snapshot(_ box: Sandbox) throws -> [String] {
    var entries: [String] = []
    let base = box.dataPath
    let walker = FileManager.default.enumerator(atPath: base)
    while let item = walker?.nextObject() as? String {
      let path = "\(base)/\(item)"
      guard !item.hasSuffix("-shm"), let attributes = try? FileManager.default.attributesOfItem(atPath: path),
        !(item.hasSuffix("-wal") && (attributes[.size] as? NSNumber)?.intValue == 0)
      else { continue }
      let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
      let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
      if attributes[.type] as? FileAttributeType == .typeDirectory {
        entries.append("dir \(item) \(String(mode, radix: 8))")
      } else {
        entries.append("file \(item) \(String(mode, radix: 8)) \(modified) \(try CLI.opensslSHA256(path))")
      }
    }
    if TestCatalog.isPostgres {
      let larder = try Larder(
        at: box.data, configuration: TestStore.configuration(.init(backgroundMD5: false, readOnly: true), for: box.data))
      for table in ["blobs", "files", "objects", "uploads", "settings", "records", "attachments"] {
        try larder.catalog.read { db in
          for row in try db.rows("SELECT * FROM \(table) ORDER BY 1") { entries.append("\(table) \(row.values)") }
        }
      }
    }
    return entries.sorted()
  }

  /// Proves (issue 31): `gc --dry-run` opens the store read-only. A store with a crashed
  /// collection's trash entry, an abandoned temp file and five files released minutes ago
  /// (kept by the 24 h grace period): the dry run reports them in an operator's words, and
  /// every file of the data directory (the SQLite catalog and its log among them) and every
  /// catalog row are the same after it, bytes, modes and times. A real run then recovers.
  @Test func dryRunOpensTheStoreReadOnlyAndExplainsWhatTheGracePeriodKeeps() throws {
    let fixture = try CrashTests.GCFixture()
    let box = fixture.box
    let trash = box.data.appendingPathComponent("trash/\(String(repeating: "ab", count: 32)).0")
    try Data("left by a collection that crashed".utf8).write(to: trash)
    let temp = box.data.appendingPathComponent("tmp/abandoned-write")
    try Data(repeating: 7, count: 4096).write(to: temp)
    try FileManager.default.setAttributes([.modificationDate: Date() - 600], ofItemAtPath: temp.path)
    let before = try snapshot(box)
    #expect(before.contains { $0.hasPrefix("file tmp/abandoned-write ") })

    let dry = try box.larder("gc", "--dry-run")
    #expect(dry.status == 0, "\(dry)")
    let after = try snapshot(box)
    #expect(after == before, "changed: \(Set(after).symmetricDifference(before).sorted())")
    let lines = dry.stdoutLines
    #expect(lines.contains("expired uploads:   0 (0 B) would be deleted"), "\(dry.stdout)")
    #expect(
      lines.contains("unused files:      0 would be deleted (nothing refers to them, uploaded more than 24 h ago)"),
      "\(dry.stdout)")
    #expect(lines.contains("temp files:        1 (4.0 KiB)"), "\(dry.stdout)")
    #expect(
      lines.contains("interrupted gc:    1 entries in trash/ (a real run puts them back or removes them)"),
      "\(dry.stdout)")
    // Four orphans of 20,000-20,003 bytes and a removed duplicate of 10,000: 90,006 bytes.
    #expect(
      lines.contains(
        "kept for now:      5 unused files (87.9 KiB) uploaded less than 24 h ago (--grace); a gc after that removes them unless something refers to them by then"
      ), "\(dry.stdout)")
    #expect(!dry.stdout.contains("released"), "\(dry.stdout)")
    #expect(lines.last?.hasSuffix("(dry run: nothing changed)") == true)
    let json = try box.larder("gc", "--dry-run", "--json").jsonObject()
    #expect(json["filesHeldByGrace"] as? Int == 5)
    #expect(json["bytesHeldByGrace"] as? Int == 90_006)
    #expect(try snapshot(box) == before)

    // A real run does what the dry run left: the trash entry and the temp file go.
    #expect(try box.larder("gc").status == 0)
    #expect(!FileManager.default.fileExists(atPath: trash.path))
    #expect(!FileManager.default.fileExists(atPath: temp.path))
    try fixture.expectLiveIntact()
  }

  /// Proves: a dry run does not migrate. A catalog one schema version behind is refused with a
  /// message saying it needs migrating, and the file is left as it was.
  @Test(TestCatalog.sqliteOnly) func dryRunRefusesACatalogThatNeedsMigrating() throws {
    let box = try Sandbox()
    try box.put("bkt/x", [1, 2, 3])
    do {
      let larder = try TestStore.open(at: box.data)
      try larder.catalog.write { db in try db.execute("PRAGMA user_version = \(Larder.catalogSchemaVersion - 1)") }
      try larder.checkpoint()
    }
    let before = try snapshot(box)
    let dry = try box.larder("gc", "--dry-run")
    #expect(dry.status == 1, "\(dry)")
    #expect(dry.stderr.contains("it needs migrating, which a read-only open (a dry run) does not do"), "\(dry.stderr)")
    #expect(try snapshot(box) == before)
  }

  @Test func graceKeepsYoungUnreferencedFiles() throws {
    let fixture = try CrashTests.GCFixture()
    let box = fixture.box
    // Default grace (24 h): the fresh orphans stay.
    let gc = try box.larder("gc", "--json")
    #expect(gc.status == 0, "\(gc)")
    let report = try gc.jsonObject()
    #expect(report["filesReleased"] as? Int == 0)
    #expect(report["blobsRemoved"] as? Int == 0)
    #expect(report["graceSeconds"] as? Double == 86400)
    #expect(box.blobFileNames.count == 7)
  }

  @Test func verifyFindsAFlippedByteAndRepairQuarantinesIt() throws {
    let box = try Sandbox()
    let bytes = pseudoRandomBytes(4096, seed: 31)
    try box.put("bkt/victim", bytes)
    try box.put("bkt/bystander", Array("fine".utf8))
    let sha = try CLI.opensslSHA256(box.write("v", bytes))

    let clean = try box.larder("verify")
    #expect(clean.status == 0, "\(clean)")
    #expect(clean.stdout == "checked 2 blobs (4.0 KiB): 0 findings, 0 unrepaired, 0 quarantined\n")

    // Flip one byte of the blob file (it is read-only: allow writing, flip, restore the mode).
    let path = box.data.appendingPathComponent(
      "blobs/sha256/\(sha.prefix(2))/\(sha.dropFirst(2).prefix(2))/\(sha)"
    ).path
    var st = stat()
    #expect(stat(path, &st) == 0)
    #expect(st.st_mode & 0o777 == 0o444)
    #expect(chmod(path, 0o644) == 0)
    let fd = open(path, O_RDWR)
    #expect(fd >= 0)
    var byte: UInt8 = 0
    #expect(pread(fd, &byte, 1, 1000) == 1)
    byte ^= 0xff
    #expect(pwrite(fd, &byte, 1, 1000) == 1)
    close(fd)
    #expect(chmod(path, 0o444) == 0)

    let dirty = try box.larder("verify")
    #expect(dirty.status == 1, "\(dirty)")
    #expect(dirty.stdoutLines.count == 3)
    #expect(dirty.stdoutLines.first?.hasPrefix("FAULT  hash-mismatch  \(sha)  ") == true, "\(dirty)")
    #expect(
      dirty.stdoutLines.dropFirst().first
        == "damaged  bkt/victim  content \(sha) (not quarantined yet: --repair does); upload the object's original bytes again to heal it",
      "\(dirty)")
    #expect(dirty.stdoutLines.last == "checked 2 blobs (4.0 KiB): 1 findings, 1 unrepaired, 0 quarantined")
    let dirtyJSON = try box.larder("verify", "--json")
    #expect(dirtyJSON.status == 1)
    let findings = try dirtyJSON.jsonObject()["findings"] as? [[String: Any]] ?? []
    #expect(findings.map { $0["kind"] as? String } == ["hash-mismatch"])
    #expect(findings.first?["sha256"] as? String == sha)
    #expect(findings.first?["repaired"] as? Bool == false)
    // Before repair, a download must not hand out the wrong bytes silently… it is what verify is for;
    // after repair it is refused with a clear error.
    let repair = try box.larder("verify", "--repair")
    #expect(repair.status == 0, "\(repair)")
    #expect(repair.stdoutLines.first?.hasPrefix("repaired  hash-mismatch  \(sha)") == true, "\(repair)")
    #expect(repair.stdoutLines.contains("checked 2 blobs (4.0 KiB): 1 findings, 0 unrepaired, 1 quarantined"), "\(repair)")

    let get = try box.larder("get", "bkt/victim", "-o", box.path("out"))
    #expect(get.status == 1, "\(get)")
    #expect(
      get.stderr
        == "larder: error: the stored content of this object (\(sha)) is damaged: it failed verification and was quarantined; upload the object's original bytes again to heal it\n"
    )
    #expect(!FileManager.default.fileExists(atPath: box.path("out")))
    #expect(try box.larder("get", "bkt/bystander").stdoutBytes == Array("fine".utf8))
    // Afterwards the store verifies clean, with the quarantine reported.
    let after = try box.larder("verify")
    #expect(after.status == 0, "\(after)")
    #expect(after.stdoutLines.last?.hasSuffix("0 findings, 0 unrepaired, 1 quarantined") == true, "\(after)")
    #expect(box.files(under: "quarantine").count == 1)
  }

  @Test func verifyReportsAStrayFileAndAMissingBlob() throws {
    let box = try Sandbox()
    try box.put("bkt/one", Array("one".utf8))
    try box.put("bkt/two", Array("two".utf8))
    let two = try CLI.opensslSHA256(box.write("t", Array("two".utf8)))
    let twoPath = box.data.appendingPathComponent(
      "blobs/sha256/\(two.prefix(2))/\(two.dropFirst(2).prefix(2))/\(two)"
    ).path
    #expect(unlink(twoPath) == 0)
    try box.write("data/blobs/sha256/extra-file", Array("planted".utf8))
    let verify = try box.larder("verify", "--json")
    #expect(verify.status == 1)
    let kinds = ((try verify.jsonObject()["findings"] as? [[String: Any]]) ?? []).compactMap {
      $0["kind"] as? String
    }.sorted()
    #expect(kinds == ["missing-blob-file", "stray-blob-file"])
  }
}
