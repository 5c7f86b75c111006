import Foundation
import Larder
import LarderTestSupport
import Testing

/// Real crashes: `LARDER_CRASH_AT=<point>` makes the `larder` process `_exit(86)` mid-write or
/// mid-collection. Then the directory is reopened by other processes and by the library.
@Suite struct CrashTests {
  static let crashStatus: Int32 = 86

  /// Points before the commit: nothing becomes visible.
  @Test(arguments: ["after-stage", "after-link", "before-commit"])
  func crashBeforeCommitLeavesNoObject(_ point: String) throws {
    let box = try Sandbox()
    try box.put("bkt/keep", Array("kept content".utf8))
    let bytes = pseudoRandomBytes(70_000, seed: 11)
    let src = try box.write("crash.bin", bytes)
    let sha = try CLI.opensslSHA256(src)

    let crashed = try box.larder("put", src, "bkt/crash", environment: ["LARDER_CRASH_AT": point])
    #expect(crashed.status == Self.crashStatus, "\(crashed)")
    #expect(crashed.stdout == "")
    // The dead writer's staged temp file is still there until someone reopens.
    #expect(box.entries("tmp").count == 1)
    let linked = point != "after-stage"
    let keptSHA = try CLI.opensslSHA256(box.write("k", Array("kept content".utf8)))
    #expect(box.blobFileNames == (linked ? [keptSHA, sha].sorted() : [keptSHA]))

    // Reopen through the CLI: not visible, and recovery removed the abandoned temp file.
    let stat = try box.larder("stat", "bkt/crash")
    #expect(stat.status == 1)
    #expect(stat.stderr == "larder: error: object 'crash' not found in bucket 'bkt'\n")
    #expect(box.entries("tmp") == [])
    let listing = try box.larder("ls", "bkt", "--recursive", "--json").jsonObject()
    #expect((listing["items"] as? [[String: Any]])?.map { $0["name"] as? String } == ["keep"])

    // The catalog: no row for the crashed content; every blobs row has its file (I1).
    do {
      let larder = try TestStore.open(at: box.data)
      #expect(try Sandbox.blobRows(larder) == [keptSHA])
      #expect(try Sandbox.count(larder, "files") == 1)
      #expect(try Sandbox.count(larder, "objects") == 1)
      for row in try Sandbox.blobRows(larder) { #expect(box.blobFileNames.contains(row)) }
      #expect(try larder.catalog.read { db in try TestCatalog.foreignKeyViolations(db) } == 0)
    }

    // verify: a linked-but-uncommitted blob is exactly one stray file, reported as reclaimable
    // (no data lost, gc removes it), not as a fault: verify still exits 0.
    let verify = try box.larder("verify", "--json")
    let report = try verify.jsonObject()
    let findings = report["findings"] as? [[String: Any]] ?? []
    if linked {
      #expect(verify.status == 0, "\(verify)")
      #expect(findings.map { $0["kind"] as? String } == ["stray-blob-file"])
      #expect(findings.map { $0["reclaimable"] as? Bool } == [true])
      #expect(findings.map { $0["repaired"] as? Bool } == [false])
      #expect(report["reclaimableCount"] as? Int == 1)
      #expect(report["unrepairedCount"] as? Int == 0)
      #expect(
        findings.first?["sha256"] as? String == sha
          || (findings.first?["path"] as? String)?.hasSuffix(sha) == true)
      // The library's own report of the same directory says what to do about it.
      let library = try Verifier(larder: TestStore.open(at: box.data)).verify()
      #expect(library.isClean)
      #expect(
        library.reclaimableSummary
          == "1 file left by writes that never committed (reclaimable, no data lost): larder gc removes them")
    } else {
      #expect(verify.status == 0, "\(verify)")
      #expect(findings.isEmpty)
    }
    let gc = try box.larder("gc", "--grace", "0s", "--json")
    #expect(gc.status == 0, "\(gc)")
    let gcReport = try gc.jsonObject()
    #expect(gcReport["strayFilesRemoved"] as? Int == (linked ? 1 : 0))
    #expect(gcReport["strayBytesFreed"] as? Int == (linked ? bytes.count : 0))
    #expect(gcReport["blobsRemoved"] as? Int == 0)
    #expect(gcReport["filesReleased"] as? Int == 0)
    let clean = try box.larder("verify")
    #expect(clean.status == 0, "\(clean)")
    #expect(clean.stdoutLines.last == "checked 1 blobs (12 B): 0 findings, 0 unrepaired, 0 quarantined")
    #expect(box.blobFileNames == [keptSHA])

    // The same content stored again afterwards works and reads back exactly.
    let retry = try box.larder("put", src, "bkt/crash")
    #expect(retry.status == 0, "\(retry)")
    #expect(try box.larder("get", "bkt/crash").stdoutBytes == bytes)
    #expect(try box.larder("verify").status == 0)
  }

  /// A crash after the commit: the write was acknowledged by the catalog and survives.
  @Test func crashAfterCommitKeepsTheObject() throws {
    let box = try Sandbox()
    let bytes = pseudoRandomBytes(50_000, seed: 12)
    let src = try box.write("c.bin", bytes)
    let crashed = try box.larder("put", src, "bkt/committed", environment: ["LARDER_CRASH_AT": "after-commit"])
    #expect(crashed.status == Self.crashStatus, "\(crashed)")
    #expect(box.entries("tmp").count == 1)

    let get = try box.larder("get", "bkt/committed")
    #expect(get.status == 0, "\(get)")
    #expect(get.stdoutBytes == bytes)
    #expect(box.entries("tmp") == [])
    let stat = try box.larder("stat", "bkt/committed", "--json").jsonObject()
    #expect(stat["sha256"] as? String == (try CLI.opensslSHA256(src)))
    do {
      let larder = try TestStore.open(at: box.data)
      #expect(try Sandbox.blobRows(larder) == [try CLI.opensslSHA256(src)])
      #expect(box.blobFileNames == [try CLI.opensslSHA256(src)])
    }
    let verify = try box.larder("verify")
    #expect(verify.status == 0, "\(verify)")
  }

  /// A store with referenced content, shared content and orphans.
  struct GCFixture {
    let box: Sandbox
    /// object → bytes that must survive every collection.
    var live: [String: [UInt8]] = [:]
    var orphanSHAs: [String] = []
    var orphanBytes = 0

    init() throws {
      box = try Sandbox()
      for i in 0..<3 {
        let bytes = pseudoRandomBytes(10_000 + i, seed: 100 + UInt64(i))
        try box.put("bkt/live-\(i)", bytes)
        live["live-\(i)"] = bytes
      }
      // Shared: the removed name's content is still referenced by live-0.
      try box.put("bkt/dup-of-live-0", live["live-0"]!)
      #expect(try box.larder("rm", "bkt/dup-of-live-0").status == 0)
      for i in 0..<4 {
        let bytes = pseudoRandomBytes(20_000 + i, seed: 200 + UInt64(i))
        try box.put("bkt/orphan-\(i)", bytes)
        orphanSHAs.append(try CLI.opensslSHA256(box.write("o\(i)", bytes)))
        orphanBytes += bytes.count
        #expect(try box.larder("rm", "bkt/orphan-\(i)").status == 0)
      }
      orphanSHAs.sort()
    }

    func expectLiveIntact() throws {
      for (name, bytes) in live {
        let get = try box.larder("get", "bkt/\(name)")
        #expect(get.status == 0, "\(name): \(get)")
        #expect(get.stdoutBytes == bytes, "\(name)")
      }
    }
  }

  /// (point, trash entries the crash leaves, orphans the collection after recovery still removes)
  static let gcPoints: [(String, Int, Int)] = [
    ("gc-after-trash", 4, 4),  // rolled back: recovery puts all 4 back, the next gc removes them
    ("gc-mid-batch", 2, 4),  // half the batch moved, rolled back
    ("gc-after-commit", 4, 0),  // committed: recovery unlinks the trash
  ]

  @Test(arguments: 0..<gcPoints.count) func crashDuringCollection(_ index: Int) throws {
    let (point, trashLeft, removedAfter) = Self.gcPoints[index]
    let fixture = try GCFixture()
    let box = fixture.box
    #expect(box.blobFileNames.count == 7)

    let crashed = try box.larder("gc", "--grace", "0s", environment: ["LARDER_CRASH_AT": point])
    #expect(crashed.status == Self.crashStatus, "\(crashed)")
    #expect(box.entries("trash").count == trashLeft, "\(box.entries("trash"))")

    // Reopen: recovery restores or removes the trash; nothing referenced is lost.
    let verify = try box.larder("verify", "--json")
    #expect(verify.status == 0, "\(verify)")
    #expect((try verify.jsonObject()["findings"] as? [Any])?.count == 0)
    #expect(box.entries("trash") == [])
    try fixture.expectLiveIntact()
    do {
      let larder = try TestStore.open(at: box.data)
      let rows = try Sandbox.blobRows(larder)
      #expect(rows == box.blobFileNames)
      #expect(rows.count == 3 + removedAfter)
      #expect(try Sandbox.count(larder, "objects") == 3)
      #expect(try Sandbox.count(larder, "files") == 3)  // released before the crash, committed
      #expect(try larder.catalog.read { db in try TestCatalog.foreignKeyViolations(db) } == 0)
    }

    let gc = try box.larder("gc", "--grace", "0s", "--json")
    #expect(gc.status == 0, "\(gc)")
    let report = try gc.jsonObject()
    #expect(report["blobsRemoved"] as? Int == removedAfter)
    #expect(report["filesReleased"] as? Int == 0)
    #expect(report["strayFilesRemoved"] as? Int == 0)
    #expect(report["trashRestored"] as? Int == 0)
    #expect(report["trashRemoved"] as? Int == 0)
    #expect(box.blobFileNames.count == 3)
    #expect(Set(box.blobFileNames).isDisjoint(with: fixture.orphanSHAs))
    let clean = try box.larder("verify")
    #expect(clean.status == 0, "\(clean)")
    try fixture.expectLiveIntact()
  }
}
