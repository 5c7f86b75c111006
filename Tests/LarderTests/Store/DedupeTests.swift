import Foundation
import LarderTestSupport
import Larder
import Testing

/// Identical content is stored once, however many names and files refer to it.
@Suite struct DedupeTests {
  @Test func hundredPutsOfTheSameBytesStoreOneBlob() throws {
    let larder = try TestStore.temporary()
    var random = PseudoRandomBytes(seed: 100)
    let bytes = Data(random.bytes(70_000))
    var fileIDs = Set<String>()
    for i in 0..<100 {
      let object = try larder.objects.put(bucket: "dedupe", name: "copies/\(i).bin", data: bytes)
      #expect(object.file.sha256 == sha256Hex(bytes))
      fileIDs.insert(object.file.id)
    }
    #expect(fileIDs.count == 100)
    #expect(try larder.storeRowCount("blobs") == 1)
    #expect(try larder.storeRowCount("files") == 100)
    #expect(try larder.storeRowCount("objects") == 100)
    let hex = sha256Hex(bytes)
    #expect(larder.storeBlobFiles() == ["blobs/sha256/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))/\(hex)"])
    #expect(larder.storeTempFiles() == [])
    for i in [0, 57, 99] {
      let object = try larder.objects.get(bucket: "dedupe", name: "copies/\(i).bin")
      #expect(try larder.files.data(of: object.file) == bytes)
    }
    let referencing = try larder.catalog.read { db in
      try db.row("SELECT count(DISTINCT blob_sha256) AS n FROM files")?.int("n")
    }
    #expect(referencing == 1)
  }

  /// A blob file left at its address by a crash between link and commit (no row) is replaced by the
  /// verified staged copy, not trusted.
  @Test func strayFileAtTheAddressIsReplacedByVerifiedContent() throws {
    let larder = try TestStore.temporary()
    let bytes = Data("the real content\n".utf8)
    let hex = sha256Hex(bytes)
    let leaf = larder.directory.appendingPathComponent("blobs/sha256/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))")
    try FileManager.default.createDirectory(at: leaf, withIntermediateDirectories: true)
    try Data("garbage of another length".utf8).write(to: leaf.appendingPathComponent(hex))

    let object = try larder.objects.put(bucket: "b", name: "real.txt", data: bytes)
    #expect(try larder.files.data(of: object.file) == bytes)
    #expect(try Data(contentsOf: leaf.appendingPathComponent(hex)) == bytes)
    #expect(try larder.storeCounts() == [1, 1, 1])
  }
}
