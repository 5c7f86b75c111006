import Foundation
import Larder
import LarderTestSupport
import Testing

private struct Owner: Model, Equatable {
  var id: String
  var name: String
  var avatar: File?
}

private struct Pet: Model, Equatable {
  var id: String
  var ownerID: String
  var photos: [File] = []
  static let references = [ModelReference("ownerID", to: Owner.self, onDelete: .cascade)]
}

/// `larder models export` / `import`: a type's documents out and back, with what keeps files
/// alive and references valid, all or nothing.
@Suite struct ModelCommandTests {
  private func run(_ box: Sandbox, _ arguments: String...) throws -> RunResult {
    try CLI.larder(Array(arguments.prefix(2)) + ["--data", box.dataPath] + arguments.dropFirst(2))
  }

  private func attachmentCount(_ larder: Larder) throws -> Int64? {
    try larder.catalog.read { try $0.row("SELECT count(*) AS n FROM attachments")?.int("n") }
  }

  /// The records of an exported bundle, decoded.
  private func records<T: Model>(_ type: T.Type, _ bundle: String) throws -> [T] {
    try bundle.split(separator: "\n").compactMap { line in
      let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
      guard let record = object?["record"] else { return nil }
      return try JSONDecoder().decode(T.self, from: JSONSerialization.data(withJSONObject: record))
    }
  }

  @Test func exportThenImportRestoresDocumentsAttachmentsAndReferences() throws {
    let box = try Sandbox()
    let larder = try TestStore.open(at: box.data)
    let face = try larder.files.put(Data("face".utf8))
    let cat = try larder.files.put(Data("cat".utf8))
    try larder.write { tx in
      try tx.save(Owner(id: "o1", name: "Ada", avatar: face))
      try tx.save(Owner(id: "o2", name: "Alan"))
      try tx.save(Pet(id: "p1", ownerID: "o1", photos: [cat, face]))
    }
    let owners = try run(box, "models", "export", "Owner")
    #expect(owners.status == 0, "\(owners)")
    let pets = try run(box, "models", "export", "Pet")
    let parsed = try records(Owner.self, owners.stdout)
    #expect(parsed == [Owner(id: "o1", name: "Ada", avatar: face), Owner(id: "o2", name: "Alan")])
    // header, the file and its bytes, two records, end
    #expect(owners.stdout.split(separator: "\n").count == 6)
    #expect(
      try run(box, "models", "export", "Nobody").stdout
        == "{\"bundle\":\"larder-models\",\"rules\":[],\"type\":\"Nobody\",\"version\":1}\n{\"end\":{\"files\":0,\"records\":0}}\n")

    // Gone, then back from the export: the same models, the files attached again, the cascade kept.
    #expect(try larder.models.delete(Owner.self, id: "o1"))  // cascades to p1
    #expect(try larder.models.delete(Owner.self, id: "o2"))
    #expect(try attachmentCount(larder) == 0)
    let ownersFile = try box.write("owners.json", Array(owners.stdout.utf8))
    let petsFile = try box.write("pets.json", Array(pets.stdout.utf8))
    let imported = try run(box, "models", "import", "Owner", ownersFile)
    #expect(imported.status == 0, "\(imported)")
    #expect(imported.stdout == "imported 2 Owner records\n")
    #expect(try run(box, "models", "import", "Pet", petsFile).status == 0)
    #expect(try larder.models.find(Owner.self, id: "o1") == Owner(id: "o1", name: "Ada", avatar: face))
    #expect(try larder.models.find(Pet.self, id: "p1") == Pet(id: "p1", ownerID: "o1", photos: [cat, face]))
    #expect(try attachmentCount(larder) == 3)
    #expect(
      try Set(larder.models.attachments(of: Pet.self, id: "p1").map(\.property)) == [
        "photos[0]", "photos[1]",
      ])
    #expect(try larder.models.delete(Owner.self, id: "o1"))
    #expect(try larder.models.find(Pet.self, id: "p1") == nil)  // the recorded cascade held
  }

  @Test func badImportsAreRefusedAndChangeNothing() throws {
    let box = try Sandbox()
    let larder = try TestStore.open(at: box.data)
    let photo = try larder.files.put(Data("photo".utf8))
    try larder.write { tx in
      try tx.save(Owner(id: "o1", name: "Ada"))
      try tx.save(Pet(id: "p1", ownerID: "o1"))  // records Pet's reference
    }
    let wrongHash = String(repeating: "0", count: 64)
    let cases: [(String, String)] = [
      ("{\"id\": \"x\"}", "model bundle, line 1: not a larder-models bundle of version 1"),
      ("[1]", "document 0 is not an object"),
      ("[{\"name\": \"no id\"}]", "document 0 has no string id"),
      ("[{\"id\": \"a\"}, {\"id\": \"a\"}]", "id 'a' appears twice"),
      (
        "[{\"id\": \"p2\", \"ownerID\": \"ghost\"}]",
        "Pet 'p2' refers through 'ownerID' to Owner 'ghost', which does not exist"
      ),
      (
        "[{\"id\": \"p3\", \"ownerID\": \"o1\", \"photos\": [{\"id\": \"\(photo.id)\", \"sha256\": \"\(wrongHash)\", \"size\": 5}]}]",
        "file \(photo.id): its bytes do not match: expected SHA-256 \(wrongHash), found SHA-256 \(photo.sha256)"
      ),
      ("[{\"id\": \"p4\", \"ownerID\": \"o1\"}, ", "not JSON"),
    ]
    for (json, message) in cases {
      let file = try box.write("bad.json", Array(json.utf8))
      let result = try run(box, "models", "import", "Pet", file)
      #expect(result.status == 1, "\(json): \(result)")
      #expect(result.stderr.contains(message), "\(json): \(result.stderr)")
    }
    #expect(try larder.models.query(Query(Pet.self)).map(\.id) == ["p1"])
    // A type name the catalog cannot hold is refused on both sides.
    let empty = try run(box, "models", "export", "")
    #expect(empty.status == 1 && empty.stderr.contains("invalid model type name"), "\(empty)")
    // Standard input works as the file.
    let piped = try CLI.larder(
      ["models", "import", "Owner", "--data", box.dataPath, "-"], stdin: Array("[{\"id\": \"o9\", \"name\": \"Grace\"}]".utf8))
    #expect(piped.status == 0 && piped.stdout == "imported 1 Owner records\n", "\(piped)")
    #expect(try larder.models.find(Owner.self, id: "o9") == Owner(id: "o9", name: "Grace"))
    // The right hash attaches.
    let good =
      "[{\"id\": \"p5\", \"ownerID\": \"o1\", \"photos\": [\(String(decoding: try JSONEncoder().encode(photo), as: UTF8.self))]}]"
    #expect(try run(box, "models", "import", "Pet", box.write("good.json", Array(good.utf8))).status == 0)
    #expect(try larder.models.find(Pet.self, id: "p5")?.photos == [photo])
    #expect(try larder.models.attachments(of: Pet.self, id: "p5").map(\.fileID) == [photo.id])
  }

  /// Proves (issue 31): export and import move a type's records to another, empty store. The
  /// bundle brings the attached files' bytes (one over several chunks) and the type's
  /// reference rules: the records come back with their files readable, byte for byte, and a
  /// typed delete in the new store cascades as the source's rules say.
  @Test func aBundleMovesRecordsWithTheirFilesAndRulesIntoAnEmptyStore() throws {
    let source = try Sandbox()
    let larder = try TestStore.open(at: source.data)
    let large = (0..<500_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
    let face = try larder.files.put(Data("face".utf8), filename: "face.txt")
    let film = try larder.files.put(Data(large), filename: "film.bin")
    try larder.write { tx in
      try tx.save(Owner(id: "o1", name: "Ada", avatar: face))
      try tx.save(Pet(id: "p1", ownerID: "o1", photos: [film, face]))
    }
    let owners = try run(source, "models", "export", "Owner")
    let pets = try run(source, "models", "export", "Pet")
    #expect(owners.status == 0 && pets.status == 0, "\(owners) \(pets)")
    let header = try #require(pets.stdout.split(separator: "\n").first)
    #expect(header.contains("\"rules\":[{\"field\":\"ownerID\",\"onDelete\":\"cascade\",\"targetType\":\"Owner\"}]"), "\(header)")
    #expect(pets.stdout.split(separator: "\n").last == "{\"end\":{\"files\":2,\"records\":1}}")

    let target = try Sandbox()
    let ownersFile = try target.write("owners.jsonl", Array(owners.stdout.utf8))
    let petsFile = try target.write("pets.jsonl", Array(pets.stdout.utf8))
    // Pets first: their owner is not there yet, and nothing is saved.
    let early = try run(target, "models", "import", "Pet", petsFile)
    #expect(early.status == 1, "\(early)")
    #expect(early.stderr.contains("Pet 'p1' refers through 'ownerID' to Owner 'o1', which does not exist"), "\(early)")
    let first = try run(target, "models", "import", "Owner", ownersFile)
    #expect(first.status == 0 && first.stdout == "imported 1 Owner records\n", "\(first)")
    let second = try run(target, "models", "import", "Pet", petsFile)
    #expect(second.status == 0 && second.stdout == "imported 1 Pet records\n", "\(second)")

    let moved = try TestStore.open(at: target.data)
    let pet = try #require(try moved.models.find(Pet.self, id: "p1"))
    #expect(pet.photos.map(\.sha256) == [film.sha256, face.sha256])
    #expect(pet.photos.map(\.filename) == ["film.bin", "face.txt"])
    #expect([UInt8](try moved.files.data(of: pet.photos[0])) == large)
    #expect(try moved.files.data(of: pet.photos[1]) == Data("face".utf8))
    let owner = try #require(try moved.models.find(Owner.self, id: "o1"))
    #expect(try owner.avatar.map { try moved.files.data(of: $0) } == Data("face".utf8))
    #expect(try attachmentCount(moved) == 3)
    #expect(try moved.models.delete(Owner.self, id: "o1"))
    #expect(try moved.models.find(Pet.self, id: "p1") == nil, "the bundle's cascade held")
  }

  /// Proves: an import checks every file's bytes against its SHA-256 and says so when they do
  /// not match, and a cut-short bundle is refused; nothing is imported either way.
  @Test func aBundleWhoseBytesDoNotMatchIsRefusedSayingSo() throws {
    let source = try Sandbox()
    let larder = try TestStore.open(at: source.data)
    let face = try larder.files.put(Data("the original face".utf8))
    try larder.models.save(Owner(id: "o1", name: "Ada", avatar: face))
    let bundle = try run(source, "models", "export", "Owner").stdout
    let lines = bundle.split(separator: "\n").map(String.init)
    let dataLine = try #require(lines.firstIndex { $0.hasPrefix("{\"data\":") })
    var tampered = lines
    tampered[dataLine] = "{\"data\":\"\(Data("the altered face!".utf8).base64EncodedString())\"}"

    let target = try Sandbox()
    let bad = try run(target, "models", "import", "Owner", target.write("bad.jsonl", Array(tampered.joined(separator: "\n").utf8)))
    #expect(bad.status == 1, "\(bad)")
    #expect(bad.stderr.contains("file \(face.id): its bytes do not match: expected SHA-256 \(face.sha256), 17 bytes"), "\(bad)")
    let cut = try run(target, "models", "import", "Owner", target.write("cut.jsonl", Array(lines.dropLast().joined(separator: "\n").utf8)))
    #expect(cut.status == 1 && cut.stderr.contains("the bundle ends early"), "\(cut)")
    let moved = try TestStore.open(at: target.data)
    #expect(try moved.models.query(Query(Owner.self)).isEmpty)
  }
}
