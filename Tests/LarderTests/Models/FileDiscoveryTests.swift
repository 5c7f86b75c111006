import Foundation
import LarderTestSupport
import Testing

@testable import Larder

@Suite struct FileDiscoveryTests {
  func upload(_ larder: Larder, _ text: String) throws -> File {
    try larder.files.put(Data(text.utf8), filename: "\(text).txt")
  }

  @Test func findsFilesInEveryPosition() throws {
    let larder = try TestStore.temporary()
    let f = try (0..<10).map { try upload(larder, "file-\($0)") }
    let gallery = Gallery(
      id: "g1", name: "Trip", avatar: f[0], album: [f[1], f[2]], profile: Profile(bio: "hi", header: f[3]),
      byName: ["cover": f[4]], media: .gallery(title: "t", files: [f[5], f[6]]), grid: [[], [f[7], f[8]]],
      maybeMany: [nil, f[9]])
    let found = try FileDiscovery.attachments(in: gallery)
    #expect(
      found.map { "\($0.property)=\($0.fileID)" } == [
        "avatar=\(f[0].id)", "album[0]=\(f[1].id)", "album[1]=\(f[2].id)", "profile.header=\(f[3].id)",
        "byName.cover=\(f[4].id)", "media.gallery.files[0]=\(f[5].id)", "media.gallery.files[1]=\(f[6].id)",
        "grid[1][0]=\(f[7].id)", "grid[1][1]=\(f[8].id)", "maybeMany[1]=\(f[9].id)",
      ])
    #expect(found.map(\.position) == Array(0..<10))

    let single = Gallery(id: "g2", name: "x", avatar: nil, media: .image(f[0]))
    #expect(try FileDiscovery.attachments(in: single).map(\.property) == ["media.image._0"])
    #expect(try FileDiscovery.attachments(in: Gallery(id: "g3", name: "empty", avatar: nil)).isEmpty)
    // A File on its own, and one inside a plain dictionary keyed by Int.
    #expect(try FileDiscovery.attachments(in: f[0]).map(\.property) == [""])
    #expect(try FileDiscovery.attachments(in: [7: f[1]]).map(\.property) == ["7"])
  }

  @Test func saveRoundTripsAndRecordsEveryAttachment() throws {
    let larder = try TestStore.temporary()
    let f = try (0..<6).map { try upload(larder, "round-\($0)") }
    let gallery = Gallery(
      id: "g1", name: "Trip", avatar: f[0], album: [f[1], f[2]], profile: Profile(bio: "b", header: f[3]),
      byName: ["a": f[4]], media: .image(f[5]))
    try larder.models.save(gallery)
    #expect(try larder.models.find(Gallery.self, id: "g1") == gallery)
    #expect(try larder.models.find(Gallery.self, id: "nope") == nil)
    let rows = try larder.attachmentRows()
    #expect(
      rows == [
        AttachmentRow(type: "Gallery", id: "g1", property: "avatar", fileID: f[0].id),
        AttachmentRow(type: "Gallery", id: "g1", property: "album[0]", fileID: f[1].id),
        AttachmentRow(type: "Gallery", id: "g1", property: "album[1]", fileID: f[2].id),
        AttachmentRow(type: "Gallery", id: "g1", property: "profile.header", fileID: f[3].id),
        AttachmentRow(type: "Gallery", id: "g1", property: "byName.a", fileID: f[4].id),
        AttachmentRow(type: "Gallery", id: "g1", property: "media.image._0", fileID: f[5].id),
      ])
    #expect(try larder.models.attachments(of: Gallery.self, id: "g1").map(\.position) == Array(0..<6))
  }

  @Test func replaceRemoveAndDeleteLeaveExactlyTheExpectedRows() throws {
    let larder = try TestStore.temporary()
    let f = try (0..<5).map { try upload(larder, "seq-\($0)") }
    var g = Gallery(id: "g", name: "n", avatar: f[0], album: [f[1], f[2]])
    var note = Note(id: "n1", text: "keep", attachment: f[4])
    try larder.models.save(g)
    try larder.models.save(note)
    #expect(
      try larder.attachmentRows() == [
        AttachmentRow(type: "Gallery", id: "g", property: "avatar", fileID: f[0].id),
        AttachmentRow(type: "Gallery", id: "g", property: "album[0]", fileID: f[1].id),
        AttachmentRow(type: "Gallery", id: "g", property: "album[1]", fileID: f[2].id),
        AttachmentRow(type: "note", id: "n1", property: "attachment", fileID: f[4].id),
      ])
    #expect(try larder.unreferencedFileIDs() == [f[3].id])

    // Replace the avatar, drop one album entry: the old avatar and f[1] are released.
    g.avatar = f[3]
    g.album = [f[2]]
    try larder.models.save(g)
    #expect(
      try larder.attachmentRows() == [
        AttachmentRow(type: "Gallery", id: "g", property: "avatar", fileID: f[3].id),
        AttachmentRow(type: "Gallery", id: "g", property: "album[0]", fileID: f[2].id),
        AttachmentRow(type: "note", id: "n1", property: "attachment", fileID: f[4].id),
      ])
    #expect(try larder.unreferencedFileIDs() == [f[0].id, f[1].id])

    // Remove every file from the model: the record stays, its rows go.
    g.avatar = nil
    g.album = []
    try larder.models.save(g)
    #expect(try larder.attachmentRows() == [AttachmentRow(type: "note", id: "n1", property: "attachment", fileID: f[4].id)])
    #expect(try larder.recordCount() == 2)

    // The same file twice in one model is two rows.
    note.attachment = f[0]
    g.album = [f[0], f[0]]
    try larder.write { tx in
      try tx.save(note)
      try tx.save(g)
    }
    #expect(
      try larder.attachmentRows() == [
        AttachmentRow(type: "note", id: "n1", property: "attachment", fileID: f[0].id),
        AttachmentRow(type: "Gallery", id: "g", property: "album[0]", fileID: f[0].id),
        AttachmentRow(type: "Gallery", id: "g", property: "album[1]", fileID: f[0].id),
      ])

    // Deleting releases everything the model held.
    #expect(try larder.models.delete(g))
    #expect(try larder.models.delete(Gallery.self, id: "g") == false)
    #expect(try larder.attachmentRows() == [AttachmentRow(type: "note", id: "n1", property: "attachment", fileID: f[0].id)])
    #expect(try larder.models.delete(Note.self, id: "n1"))
    #expect(try larder.attachmentRows().isEmpty)
    #expect(try larder.recordCount() == 0)
    #expect(try larder.unreferencedFileIDs() == Set(f.map(\.id)))
    #expect(try larder.foreignKeyProblems() == 0)
  }

  @Test func savingAModelWithAMissingFileFailsAndSavesNothing() throws {
    let larder = try TestStore.temporary()
    let real = try upload(larder, "real")
    let ghost = File(
      id: "0000000000000000000000000000", sha256: real.sha256, size: real.size, md5: real.md5,
      contentType: real.contentType, declaredContentType: nil, filename: nil, createdAt: real.createdAt)
    let original = Gallery(id: "g", name: "before", avatar: real)
    try larder.models.save(original)

    let broken = Gallery(id: "g", name: "after", avatar: real, album: [ghost])
    #expect(throws: LarderError.fileNotFound(id: ghost.id)) { try larder.models.save(broken) }
    #expect(try larder.models.find(Gallery.self, id: "g") == original)
    #expect(try larder.attachmentRows() == [AttachmentRow(type: "Gallery", id: "g", property: "avatar", fileID: real.id)])

    // In a multi-model transaction the earlier saves roll back too.
    #expect(throws: LarderError.fileNotFound(id: ghost.id)) {
      try larder.write { tx in
        try tx.save(Note(id: "n", text: "first", attachment: real))
        try tx.save(Note(id: "m", text: "second", attachment: ghost))
      }
    }
    #expect(try larder.models.find(Note.self, id: "n") == nil)
    #expect(try larder.recordCount() == 1)
    #expect(try larder.attachmentRows().count == 1)
  }

  @Test func rejectsEmptyIdentifiersAndHostileTypeNames() throws {
    let larder = try TestStore.temporary()
    #expect(throws: ModelError.emptyIdentifier(type: "note")) { try larder.models.save(Note(id: "", text: "x")) }
    struct Quoted: Model {
      static let modelType = "it's \"quoted\"; DROP TABLE records; --"
      var id: String
    }
    try larder.models.save(Quoted(id: "q"))
    #expect(try larder.models.query(Query(Quoted.self)).map(\.id) == ["q"])
    #expect(try larder.models.find(Quoted.self, id: "q")?.id == "q")
    struct Nul: Model {
      static let modelType = "a\u{0}b"
      var id: String
    }
    #expect(throws: ModelError.invalidModelType("a\u{0}b")) { try larder.models.save(Nul(id: "x")) }
    #expect(try larder.recordCount() == 1)
  }

  @Test func storedBodyThatNoLongerDecodesIsATypedError() throws {
    let larder = try TestStore.temporary()
    try larder.catalog.write { db in
      try db.execute(
        "INSERT INTO records(type, id, body, created_at, updated_at) VALUES ('note', 'bad', '{\"id\":\"bad\"}', 0, 0)")
    }
    #expect {
      try larder.models.find(Note.self, id: "bad")
    } throws: { error in
      (error as? ModelError)?.code == "decoding-failed"
    }
  }
}
