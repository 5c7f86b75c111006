import Foundation
import LarderTestSupport
import LarderCrypto
import Testing

@testable import Larder

/// Repair moves a corrupt blob to quarantine/ and drops the catalog row no file refers to.
@Suite struct QuarantineTests {
  @Test func quarantiningABlobNoFileUsesDropsItsRow() throws {
    let dir = ScratchDirectory("verify-quarantine")
    let larder = try TestStore.open(at: dir.url)
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
}
