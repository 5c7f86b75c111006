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
    #expect(text.stdoutLines.contains("files released:    5"))
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
    #expect(secondText.stdoutLines.contains("blobs removed:     0 (0 B)"))
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
    #expect(dirty.stdoutLines.count == 2)
    #expect(dirty.stdoutLines.first?.hasPrefix("FAULT  hash-mismatch  \(sha)  ") == true, "\(dirty)")
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

    let get = try box.larder("get", "bkt/victim", "-o", box.path("out"))
    #expect(get.status == 1, "\(get)")
    #expect(get.stderr == "larder: error: stored content \(sha) failed verification and is quarantined\n")
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
