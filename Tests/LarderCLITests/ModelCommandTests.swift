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
    let parsed = try JSONDecoder().decode([Owner].self, from: Data(owners.stdout.utf8))
    #expect(parsed == [Owner(id: "o1", name: "Ada", avatar: face), Owner(id: "o2", name: "Alan")])
    #expect(owners.stdout.split(separator: "\n").count == 4)  // [, two documents, ]
    #expect(try run(box, "models", "export", "Nobody").stdout == "[]\n")

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
      ("{\"id\": \"x\"}", "the import must be a JSON array of documents"),
      ("[1]", "document 0 is not an object"),
      ("[{\"name\": \"no id\"}]", "document 0 has no string id"),
      ("[{\"id\": \"a\"}, {\"id\": \"a\"}]", "id 'a' appears twice"),
      (
        "[{\"id\": \"p2\", \"ownerID\": \"ghost\"}]",
        "Pet 'p2' refers through 'ownerID' to Owner 'ghost', which does not exist"
      ),
      (
        "[{\"id\": \"p3\", \"ownerID\": \"o1\", \"photos\": [{\"id\": \"\(photo.id)\", \"sha256\": \"\(wrongHash)\", \"size\": 5}]}]",
        photo.id
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
}
