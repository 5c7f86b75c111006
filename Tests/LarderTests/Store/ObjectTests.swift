import Foundation
import LarderTestSupport
import Larder
import Testing

/// Objects: generations, conditional writes, updates, deletes, and names.
@Suite struct ObjectTests {
  @Test func replacingContentBumpsGenerationAndUpdateBumpsMetageneration() throws {
    let larder = try TestStore.temporary()
    let first = try larder.objects.put(bucket: "b", name: "doc.txt", data: Data("one".utf8))
    #expect(first.metageneration == 1)
    #expect(first.generation > 0)
    #expect(first.file.filename == "doc.txt")
    #expect(first.downloadTokens.count == 1)

    let second = try larder.objects.put(bucket: "b", name: "doc.txt", data: Data("two".utf8))
    #expect(second.generation > first.generation)
    #expect(second.metageneration == 1)
    #expect(second.file.id != first.file.id)
    #expect(try larder.files.data(of: try larder.objects.get(bucket: "b", name: "doc.txt").file) == Data("two".utf8))
    // Replacing with identical bytes is still a new generation.
    let third = try larder.objects.put(bucket: "b", name: "doc.txt", data: Data("two".utf8))
    #expect(third.generation > second.generation)
    #expect(try larder.storeCounts() == [2, 3, 1])

    let updated = try larder.objects.update(
      bucket: "b", name: "doc.txt",
      patch: ObjectPatch(cacheControl: "max-age=60", metadata: ["owner": "u1", "tag": "x"]))
    #expect(updated.generation == third.generation)
    #expect(updated.metageneration == 2)
    #expect(updated.cacheControl == "max-age=60")
    #expect(updated.metadata == ["owner": "u1", "tag": "x"])
    let removed = try larder.objects.update(
      bucket: "b", name: "doc.txt", patch: ObjectPatch(cacheControl: .some(nil), metadata: ["tag": nil]))
    #expect(removed.metageneration == 3)
    #expect(removed.cacheControl == nil)
    #expect(removed.metadata == ["owner": "u1"])
    let fetched = try larder.objects.get(bucket: "b", name: "doc.txt")
    #expect(fetched.metageneration == 3)
    #expect(fetched.generation == third.generation)
    #expect(fetched.metadata == ["owner": "u1"])
    #expect(fetched.firebaseMetadata.metageneration == "3")
    #expect(fetched.firebaseMetadata.generation == String(third.generation))

    #expect(throws: LarderError.preconditionFailed("metageneration is 3, the update required 2")) {
      try larder.objects.update(bucket: "b", name: "doc.txt", patch: ObjectPatch(contentType: "text/x", ifMetagenerationMatch: 2))
    }
    let typed = try larder.objects.update(
      bucket: "b", name: "doc.txt", patch: ObjectPatch(contentType: "text/x-custom", ifMetagenerationMatch: 3))
    #expect(typed.contentType == "text/x-custom")
    #expect(typed.metageneration == 4)
    let badType = #expect(throws: LarderError.self) {
      try larder.objects.update(bucket: "b", name: "doc.txt", patch: ObjectPatch(contentType: "nonsense"))
    }
    #expect(errorCode(of: badType) == "invalid-argument")
    #expect(try larder.objects.get(bucket: "b", name: "doc.txt").metageneration == 4)
  }

  @Test func ifGenerationMatchGuardsWrites() throws {
    let larder = try TestStore.temporary()
    let created = try larder.objects.put(
      bucket: "b", name: "once", data: Data("first".utf8), options: ObjectWriteOptions(ifGenerationMatch: 0))
    let exists = #expect(throws: LarderError.self) {
      try larder.objects.put(
        bucket: "b", name: "once", data: Data("second".utf8), options: ObjectWriteOptions(ifGenerationMatch: 0))
    }
    #expect(errorCode(of: exists) == "precondition-failed")
    let stale = #expect(throws: LarderError.self) {
      try larder.objects.put(
        bucket: "b", name: "once", data: Data("second".utf8),
        options: ObjectWriteOptions(ifGenerationMatch: created.generation - 1))
    }
    #expect(errorCode(of: stale) == "precondition-failed")
    // Refused writes left nothing: no file row, no blob row, no blob file for "second".
    #expect(try larder.storeCounts() == [1, 1, 1])
    #expect(larder.storeBlobFiles().count == 1)
    #expect(larder.storeTempFiles() == [])

    let replaced = try larder.objects.put(
      bucket: "b", name: "once", data: Data("second".utf8),
      options: ObjectWriteOptions(ifGenerationMatch: created.generation))
    #expect(replaced.generation > created.generation)
    let missing = #expect(throws: LarderError.self) {
      try larder.objects.put(
        bucket: "b", name: "absent", data: Data("x".utf8), options: ObjectWriteOptions(ifGenerationMatch: 5))
    }
    #expect(missing == .preconditionFailed("generation is 0, the write required 5"))
  }

  @Test func deleteRemovesTheName() throws {
    let larder = try TestStore.temporary()
    let object = try larder.objects.put(bucket: "b", name: "gone", data: Data("bye".utf8))
    #expect(throws: LarderError.self) {
      try larder.objects.delete(bucket: "b", name: "gone", ifGenerationMatch: object.generation + 1)
    }
    #expect(try larder.objects.get(bucket: "b", name: "gone").generation == object.generation)
    try larder.objects.delete(bucket: "b", name: "gone", ifGenerationMatch: object.generation)
    #expect(throws: LarderError.notFound(bucket: "b", name: "gone")) {
      try larder.objects.get(bucket: "b", name: "gone")
    }
    #expect(throws: LarderError.notFound(bucket: "b", name: "gone")) {
      try larder.objects.delete(bucket: "b", name: "gone")
    }
    #expect(throws: LarderError.notFound(bucket: "b", name: "gone")) {
      try larder.objects.update(bucket: "b", name: "gone", patch: ObjectPatch(cacheControl: "no-store"))
    }
    // The file stays until the collector runs; the object row is gone.
    #expect(try larder.storeCounts() == [1, 1, 0])
    #expect(try larder.files.data(of: object.file) == Data("bye".utf8))
  }

  @Test func findAnswersNilOnlyForAbsenceAndThrowsEverythingElse() throws {
    let larder = try TestStore.temporary()
    let object = try larder.objects.put(bucket: "b", name: "here", data: Data("x".utf8))
    #expect(try larder.objects.find(bucket: "b", name: "here") == object)
    #expect(try larder.objects.find(bucket: "b", name: "absent") == nil)
    // A bad name is an error, not an absent object (callers must not read it as "create").
    #expect(throws: LarderError.self) { try larder.objects.find(bucket: "b", name: "a/../b") }
    #expect(throws: LarderError.self) { try larder.objects.find(bucket: "B!", name: "here") }
  }

  @Test func patchedContentTypeLeavesTheFilesSniffedTypeAlone() throws {
    let larder = try TestStore.temporary()
    let stored = try larder.objects.put(bucket: "b", name: "t.txt", data: Data("plain words\n".utf8))
    #expect(stored.file.contentType == "text/plain")
    let patched = try larder.objects.update(bucket: "b", name: "t.txt", patch: ObjectPatch(contentType: "text/csv"))
    #expect(patched.contentType == "text/csv")
    // The object's served type changed; what libmagic found in the bytes did not.
    let read = try larder.objects.get(bucket: "b", name: "t.txt")
    #expect(read.contentType == "text/csv")
    #expect(read.file.contentType == "text/plain")
    #expect(read.file == stored.file)
    #expect(try larder.objects.list(bucket: "b").items.first?.file == stored.file)
  }

  @Test func clearingMetadataRemovesEveryKeyThenAppliesChanges() throws {
    let larder = try TestStore.temporary()
    _ = try larder.objects.put(bucket: "b", name: "m", data: Data("x".utf8), options: .init(metadata: ["a": "1", "b": "2"]))
    let cleared = try larder.objects.update(
      bucket: "b", name: "m", patch: ObjectPatch(metadata: ["c": "3"], clearMetadata: true))
    #expect(cleared.metadata == ["c": "3"])
    #expect(try larder.objects.get(bucket: "b", name: "m").metadata == ["c": "3"])
  }

  @Test func bucketsAreSeparateNamespaces() throws {
    let larder = try TestStore.temporary()
    _ = try larder.objects.put(bucket: "one", name: "same", data: Data("1".utf8))
    _ = try larder.objects.put(bucket: "two", name: "same", data: Data("2".utf8))
    #expect(try larder.files.data(of: try larder.objects.get(bucket: "one", name: "same").file) == Data("1".utf8))
    #expect(try larder.files.data(of: try larder.objects.get(bucket: "two", name: "same").file) == Data("2".utf8))
    #expect(try larder.objects.list(bucket: "one").items.map(\.name) == ["same"])
    #expect(throws: LarderError.notFound(bucket: "three", name: "same")) {
      try larder.objects.get(bucket: "three", name: "same")
    }
  }

  static let invalidNames: [String] = [
    "", String(repeating: "a", count: 1025), String(repeating: "é", count: 513), "a\u{0}b", "a\u{7F}b", "a\nb",
    "tab\there", "\u{85}next-line", "a/../b", "..", ".", "a/./b", "a/..", "./a", "bad\u{FFFE}",
  ]

  @Test(arguments: invalidNames)
  func invalidObjectNamesAreRefused(name: String) throws {
    let larder = try TestStore.temporary()
    let error = #expect(throws: LarderError.self) {
      try larder.objects.put(bucket: "b", name: name, data: Data("x".utf8))
    }
    #expect(errorCode(of: error) == "invalid-name")
    #expect(errorCode(of: #expect(throws: LarderError.self) { try larder.objects.get(bucket: "b", name: name) }) == "invalid-name")
    #expect(errorCode(of: #expect(throws: LarderError.self) { try larder.objects.delete(bucket: "b", name: name) }) == "invalid-name")
    #expect(try larder.storeCounts() == [0, 0, 0])
    #expect(larder.storeTempFiles() == [])
  }

  static let validNames: [String] = [
    "a", String(repeating: "a", count: 1024), String(repeating: "é", count: 512), "users/u1/avatar.png",
    "a//b", "...", "a/.../b", ".hidden", "space name.txt", "emoji-\u{1F600}", "/leading", "trailing/",
    "percent%2Fslash", "..a", "a..",
  ]

  @Test(arguments: validNames)
  func validObjectNamesAreStoredVerbatim(name: String) throws {
    let larder = try TestStore.temporary()
    let object = try larder.objects.put(bucket: "b", name: name, data: Data("x".utf8))
    #expect(object.name == name)
    #expect(try larder.objects.get(bucket: "b", name: name).name == name)
    #expect(try larder.objects.list(bucket: "b").items.map(\.name) == [name])
    // A name is never a path: nothing but the blob appears on disk.
    #expect(larder.storeBlobFiles() == ["blobs/sha256/2d/71/\(sha256Hex(Data("x".utf8)))"])
  }

  @Test(arguments: [
    "", "UPPER", "-abc", "abc-", ".abc", "a b", "a/b", "a\u{0}", "bücket", String(repeating: "a", count: 223),
  ])
  func invalidBucketsAreRefused(bucket: String) throws {
    let larder = try TestStore.temporary()
    let error = #expect(throws: LarderError.self) {
      try larder.objects.put(bucket: bucket, name: "x", data: Data("x".utf8))
    }
    #expect(errorCode(of: error) == "invalid-bucket")
    #expect(errorCode(of: #expect(throws: LarderError.self) { try larder.objects.list(bucket: bucket) }) == "invalid-bucket")
    #expect(try larder.storeCounts() == [0, 0, 0])
  }

  @Test(arguments: ["a", "my-app.appspot.com", "b_1", String(repeating: "z", count: 222)])
  func validBucketsAreAccepted(bucket: String) throws {
    try ObjectName.validateBucket(bucket)
  }

  @Test func customMetadataIsLimited() throws {
    let larder = try TestStore.temporary()
    // Keys and values together: exactly 8192 bytes pass, 8193 fail.
    let atLimit = ["k": String(repeating: "v", count: 8191)]
    let object = try larder.objects.put(
      bucket: "b", name: "meta", data: Data("x".utf8), options: ObjectWriteOptions(metadata: atLimit))
    #expect(object.metadata == atLimit)
    #expect(try larder.objects.get(bucket: "b", name: "meta").metadata == atLimit)
    let over = #expect(throws: LarderError.self) {
      try larder.objects.put(
        bucket: "b", name: "meta2", data: Data("x".utf8),
        options: ObjectWriteOptions(metadata: ["k": String(repeating: "v", count: 8192)]))
    }
    #expect(over == .invalidArgument("custom metadata is larger than 8192 bytes"))
    for hostile in [["": "empty key"], ["k": "line\nbreak"], ["k\u{0}": "nul"], [String(repeating: "k", count: 257): "v"]] {
      let error = #expect(throws: LarderError.self) {
        try larder.objects.put(
          bucket: "b", name: "meta3", data: Data("x".utf8), options: ObjectWriteOptions(metadata: hostile))
      }
      #expect(errorCode(of: error) == "invalid-argument")
    }
    // An update that would go over the limit changes nothing.
    let grow = #expect(throws: LarderError.self) {
      try larder.objects.update(bucket: "b", name: "meta", patch: ObjectPatch(metadata: ["k2": "v"]))
    }
    #expect(errorCode(of: grow) == "invalid-argument")
    let unchanged = try larder.objects.get(bucket: "b", name: "meta")
    #expect(unchanged.metageneration == 1)
    #expect(unchanged.metadata == atLimit)
    #expect(try larder.storeCounts() == [1, 1, 1])
    #expect(larder.storeTempFiles() == [])
  }

  @Test func headerFieldsRefuseControlCharacters() throws {
    let larder = try TestStore.temporary()
    _ = try larder.objects.put(bucket: "b", name: "h", data: Data("x".utf8))
    for patch in [
      ObjectPatch(cacheControl: "max-age=1\r\nSet-Cookie: x=1"),
      ObjectPatch(contentDisposition: "attachment\u{0}"),
      ObjectPatch(contentDisposition: String(repeating: "a", count: 1025)),
    ] {
      let error = #expect(throws: LarderError.self) { try larder.objects.update(bucket: "b", name: "h", patch: patch) }
      #expect(errorCode(of: error) == "invalid-argument")
    }
    #expect(try larder.objects.get(bucket: "b", name: "h").metageneration == 1)
  }
}
