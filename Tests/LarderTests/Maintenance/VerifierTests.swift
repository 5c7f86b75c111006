import Foundation
import LarderCrypto
import LarderTestSupport
import Testing

@testable import Larder

@Suite struct VerifierTests {
  @Test func cleanStoreVerifiesClean() throws {
    let dir = ScratchDirectory("verify")
    let larder = try TestStore.open(at: dir.url)
    let contents = Fixture.contents(3, tag: "clean")
    for (i, data) in contents.enumerated() {
      _ = try larder.objects.put(bucket: "b", name: "o\(i)", data: data)
    }
    _ = try larder.objects.put(bucket: "b", name: "dup", data: contents[0])
    let progress = Tally()
    let report = try Verifier(larder: larder).verify(progress: { _ in progress.add("calls") })
    #expect(report.isClean)
    #expect(report.findings == [])
    #expect(report.blobsChecked == 3)
    #expect(report.bytesHashed == Int64(contents.map(\.count).reduce(0, +)))
    #expect(progress["calls"] == 1)  // throttled: every 1000 blobs, and once at the end
    #expect(report.quarantinedBlobs == 0)
    let json = try JSONDecoder().decode(VerifyReport.self, from: try JSONEncoder().encode(report))
    #expect(json == report)
  }

  @Test(TestCatalog.sqliteOnly) func findsEveryPlantedFaultAndRepairs() throws {
    let dir = ScratchDirectory("verify")
    let larder = try TestStore.open(at: dir.url)
    let contents = Fixture.contents(7, tag: "planted")
    for (i, data) in contents.enumerated() {
      _ = try larder.objects.put(bucket: "b", name: "o\(i)", data: data)
    }
    let hex = contents.map(Fixture.sha256Hex)
    let path = contents.map { Fixture.blobPath(larder, $0) }

    // o0: its blob file deleted.
    #expect(unlink(path[0]) == 0)
    // o1: one byte flipped.
    #expect(chmod(path[1], 0o644) == 0)
    var bytes = try Data(contentsOf: URL(fileURLWithPath: path[1]))
    bytes[5] ^= 0x01
    try bytes.write(to: URL(fileURLWithPath: path[1]))
    #expect(chmod(path[1], 0o444) == 0)
    // o2: writable.
    #expect(chmod(path[2], 0o644) == 0)
    // o4: its rows removed, the file left behind.
    try larder.catalog.write { db in
      try db.execute("DELETE FROM objects WHERE name = 'o4'")
      try db.execute("DELETE FROM files WHERE blob_sha256 = ?", [Hex.decode(hex[4])!])
      try db.execute("DELETE FROM blobs WHERE sha256 = ?", [Hex.decode(hex[4])!])
    }
    // o5: a symlink where the blob was (hostile: pointing outside the store).
    let outside = dir.url.appendingPathComponent("outside")
    try contents[5].write(to: outside)
    #expect(unlink(path[5]) == 0)
    #expect(symlink(outside.path, path[5]) == 0)
    // o6: a truncated file.
    #expect(chmod(path[6], 0o644) == 0)
    #expect(truncate(path[6], 10) == 0)
    #expect(chmod(path[6], 0o444) == 0)
    // An extra file, a blob row with no file, an abandoned temp, leftover trash.
    let extra = "\(larder.blobs.blobsDirectory.path)/\(hex[0].prefix(2))/junk.txt"
    try Data("junk".utf8).write(to: URL(fileURLWithPath: extra))
    let ghost = [UInt8](repeating: 0xab, count: 32)
    try larder.catalog.write { db in
      try db.execute("INSERT INTO blobs(sha256, size, created_at) VALUES (?, 10, 0)", [ghost])
    }
    try Fixture.plantTemp(larder, name: "dead.part", bytes: 3, age: 600)
    try Data("x".utf8).write(to: larder.blobs.trashDirectory.appendingPathComponent("stray-leftover"))
    // A files row whose blob does not exist, written with foreign keys off.
    let raw = try SQLiteDatabase(path: larder.directory.appendingPathComponent("larder.sqlite").path)
    try raw.execute("PRAGMA foreign_keys=OFF")
    try raw.execute(
      "INSERT INTO files(id, blob_sha256, size, md5, content_type, created_at) VALUES ('ghost', ?, 1, x'00', 'x', 0)",
      [[UInt8](repeating: 0xcd, count: 32)])

    let report = try Verifier(larder: larder).verify()
    #expect(!report.isClean)
    #expect(report.blobsChecked == 7)  // o0…o3, o5, o6 and the ghost row
    let expected: [VerifyReport.Finding.Kind: Int] = [
      .missingBlobFile: 2, .hashMismatch: 1, .badPermissions: 1, .strayBlobFile: 2, .notRegularFile: 1,
      .sizeMismatch: 1, .foreignKey: 1, .abandonedTemp: 1, .leftoverTrash: 1,
    ]
    #expect(report.counts == expected)
    // Two of them are leftovers of writes that never committed (o4's file at its address with no
    // row, the abandoned temp file): reclaimable, not faults. The misplaced junk file is a fault.
    #expect(report.findingCount == 11 && report.unrepairedCount == 9 && report.reclaimableCount == 2)
    #expect(
      Set(report.findings.filter(\.reclaimable).compactMap(\.path)) == [
        path[4], "\(larder.blobs.tmpDirectory.path)/dead.part",
      ])
    #expect(report.findings.filter(\.reclaimable).allSatisfy { $0.label == "reclaimable" })
    #expect(report.findings.first { $0.path == extra }?.label == "FAULT")
    #expect(
      report.reclaimableSummary
        == "2 files left by writes that never committed (reclaimable, no data lost): larder gc removes them")
    #expect(
      Set(report.findings.filter { $0.kind == .missingBlobFile }.compactMap(\.sha256)) == [
        hex[0], Hex.encode(ghost),
      ])
    #expect(report.findings.first { $0.kind == .hashMismatch }?.sha256 == hex[1])
    #expect(report.findings.first { $0.kind == .badPermissions }?.sha256 == hex[2])
    #expect(Set(report.findings.filter { $0.kind == .strayBlobFile }.compactMap(\.path)) == [path[4], extra])
    #expect(report.findings.first { $0.kind == .notRegularFile }?.sha256 == hex[5])
    #expect(report.findings.first { $0.kind == .sizeMismatch }?.sha256 == hex[6])
    // Verification alone changes nothing.
    #expect(try Verifier(larder: larder).verify().counts == expected)

    let repair = try Verifier(larder: larder).verify(repair: true)
    #expect(repair.counts == expected)
    #expect(repair.findings.filter { !$0.repaired }.map(\.kind) == [.foreignKey])
    #expect(!repair.isClean)
    // Corrupt and lost content answers a clear error; sound content still reads.
    for i in [0, 1, 5, 6] {
      let object = try larder.objects.get(bucket: "b", name: "o\(i)")
      #expect(throws: LarderError.corruptContent(sha256: hex[i])) {
        _ = try larder.files.data(of: object.file)
      }
    }
    for i in [2, 3] {
      let object = try larder.objects.get(bucket: "b", name: "o\(i)")
      #expect(try larder.files.data(of: object.file) == contents[i])
    }
    var st = stat()
    #expect(stat(path[2], &st) == 0 && st.st_mode & 0o7777 == 0o444)
    #expect(Set(POSIX.listDirectory(larder.blobs.quarantineDirectory.path)) == [hex[1], hex[5], hex[6]])
    #expect(POSIX.listDirectory(larder.blobs.trashDirectory.path) == [])
    #expect(POSIX.listDirectory(larder.blobs.tmpDirectory.path) == [])
    #expect(!FileManager.default.fileExists(atPath: extra))
    #expect(FileManager.default.fileExists(atPath: outside.path))
    #expect(try Fixture.count(larder, "blobs") == 6)  // the ghost row, with no files, is gone

    // The one thing repair leaves to a human; once it is gone the store is clean.
    try raw.execute("DELETE FROM files WHERE id = 'ghost'")
    let after = try Verifier(larder: larder).verify()
    #expect(after.findings == [])
    #expect(after.isClean)
    #expect(after.quarantinedBlobs == 4)
    #expect(after.blobsChecked == 6)
    // Uploading the good content again heals its quarantined blob: old and new objects read.
    let healed = try larder.objects.put(bucket: "b", name: "again", data: contents[1])
    #expect(healed.file.sha256 == hex[1])
    #expect(try larder.files.data(of: healed.file) == contents[1])
    #expect(try larder.files.data(of: larder.objects.get(bucket: "b", name: "o1").file) == contents[1])
    #expect(try Verifier(larder: larder).verify().quarantinedBlobs == 3)
    try larder.objects.delete(bucket: "b", name: "again")
    // The collector removes quarantined blobs' rows once their objects are deleted.
    for i in [0, 1, 5, 6] { try larder.objects.delete(bucket: "b", name: "o\(i)") }
    let gc = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(gc.filesReleased == 5)
    #expect(gc.blobsRemoved == 4)
    #expect(gc.blobBytesFreed == Int64(contents[1].count))  // the healed blob had a file again
    #expect(try Verifier(larder: larder).verify().findings == [])
  }
}
