import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// Stray blob files are found leaf by leaf against that leaf's catalog rows; unexpected
/// directories are reported and left for a human.
@Suite struct StrayDetectionTests {
  @Test func leafRangesCoverExactlyTheirDigests() {
    #expect(BlobTreeWalker.range(ofLeaf: "abcd")! == ([0xab, 0xcd], [0xab, 0xce]))
    #expect(BlobTreeWalker.range(ofLeaf: "abff")! == ([0xab, 0xff], [0xac, 0x00]))
    #expect(BlobTreeWalker.range(ofLeaf: "0000")! == ([0x00, 0x00], [0x00, 0x01]))
    let top = BlobTreeWalker.range(ofLeaf: "ffff")!
    #expect(top.lower == [0xff, 0xff] && top.upper == nil)
    #expect(BlobTreeWalker.range(ofLeaf: "zz") == nil)
    #expect(BlobTreeWalker.range(ofLeaf: "abc") == nil)
  }

  @Test func strayDetectionUsesEachLeafsRows() throws {
    let dir = ScratchDirectory("gc-leaf")
    let larder = try TestStore.open(at: dir.url)
    // Blobs sharing a leaf with strays, and a blob in the last leaf of all.
    let kept = Fixture.contents(40, tag: "leaf")
    for (i, data) in kept.enumerated() { _ = try larder.objects.put(bucket: "b", name: "k\(i)", data: data) }
    var strays: [String] = []
    for data in kept.prefix(5) {
      // Same leaf as a kept blob, a different digest.
      let hex = Fixture.sha256Hex(data)
      let stray = String(hex.prefix(4)) + String(repeating: "0", count: 60)
      let path = larder.blobs.path(forHex: stray)
      try Data("stray".utf8).write(to: URL(fileURLWithPath: path))
      strays.append(path)
    }
    let last = "ffff" + String(repeating: "e", count: 60)
    let lastPath = larder.blobs.path(forHex: last)
    try POSIX.makeDirectory((lastPath as NSString).deletingLastPathComponent)
    try POSIX.makeDirectory(
      ((lastPath as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent)
    try Data("last".utf8).write(to: URL(fileURLWithPath: lastPath))
    strays.append(lastPath)

    let report = try Verifier(larder: larder).verify()
    #expect(Set(report.findings.compactMap(\.path)) == Set(strays))
    #expect(report.findings.allSatisfy { $0.kind == .strayBlobFile })
    let gc = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(gc.strayFilesRemoved == 6)
    #expect(gc.strayBytesFreed == 5 * 5 + 4)
    #expect(POSIX.listDirectory(larder.blobs.trashDirectory.path) == [])
    #expect(try Verifier(larder: larder).verify().findings == [])
    for (i, data) in kept.enumerated() {
      #expect(try larder.files.data(of: larder.objects.get(bucket: "b", name: "k\(i)").file) == data)
    }
  }

  @Test func unexpectedDirectoriesAreReportedAndLeftForAHuman() throws {
    let dir = ScratchDirectory("verify-dirs")
    let larder = try TestStore.open(at: dir.url)
    let content = Data("a blob beside odd directories".utf8)
    _ = try larder.objects.put(bucket: "b", name: "o", data: content)
    let leaf = (Fixture.blobPath(larder, content) as NSString).deletingLastPathComponent
    let root = larder.blobs.blobsDirectory.path
    let odd = ["\(root)/not-hex", "\(root)/\(Fixture.sha256Hex(content).prefix(2))/zz", "\(leaf)/inner"]
    for path in odd { try POSIX.makeDirectory(path) }

    let report = try Verifier(larder: larder).verify(repair: true)
    #expect(report.findings.map(\.kind) == [.strayBlobFile, .strayBlobFile, .strayBlobFile])
    #expect(Set(report.findings.compactMap(\.path)) == Set(odd))
    #expect(report.findings.allSatisfy { !$0.repaired && $0.detail == "a directory where none belongs" })
    for path in odd { #expect(FileManager.default.fileExists(atPath: path)) }
    let dry = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero, dryRun: true))
    let real = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(dry.strayFilesRemoved == 0 && real.strayFilesRemoved == 0)
  }
}
