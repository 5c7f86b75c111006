import Foundation
import LarderTestSupport
import Testing

@testable import Larder

private struct Writer: Model, Equatable {
  var id: String
  var name: String
  var admin = false
}

private struct Story: Model, Equatable {
  var id: String
  var writerID: String
  var title: String
  var cover: File?
  static let references = [ModelReference("writerID", to: Writer.self, onDelete: .cascade)]
}

@Suite struct ModelFactoryTests {
  private let writers = ModelFactory<Writer> { n, _ in Writer(id: "writer-\(n)", name: "Writer \(n)") }

  @Test func defaultsOverridesAndSequences() throws {
    let larder = try TestStore.temporary()
    #expect(try writers.create(in: larder) == Writer(id: "writer-1", name: "Writer 1"))
    #expect(
      try writers.create(in: larder) { $0.admin = true }
        == Writer(id: "writer-2", name: "Writer 2", admin: true))
    let many = try writers.create(3, in: larder) { writer, i in writer.name = "#\(i)" }
    #expect(many.map(\.id) == ["writer-3", "writer-4", "writer-5"])
    #expect(many.map(\.name) == ["#0", "#1", "#2"])
    #expect(try larder.models.query(Query(Writer.self)).count == 5)
    #expect(try larder.models.find(Writer.self, id: "writer-2")?.admin == true)
  }

  @Test func relatedModelsAndFilesAreCreatedAndSavedWithTheirReferences() throws {
    let larder = try TestStore.temporary()
    let writers = self.writers
    let stories = ModelFactory<Story> { n, make in
      Story(
        id: "story-\(n)", writerID: try make.create(writers).id, title: "Story \(n)",
        cover: try make.file("cover \(n)"))
    }
    let story = try stories.create(in: larder)
    #expect(story.writerID == "writer-1")
    #expect(try larder.models.find(Writer.self, id: "writer-1") == Writer(id: "writer-1", name: "Writer 1"))
    #expect(try larder.files.data(of: try #require(story.cover)) == Data("cover 1".utf8))
    #expect(try larder.models.attachments(of: Story.self, id: "story-1").map(\.fileID) == [story.cover!.id])
    // An override that points at a missing model fails like any save, and saves nothing of it.
    #expect(
      throws: ModelError.referenceNotFound(
        type: "Story", id: "story-2", field: "writerID", targetType: "Writer", targetID: "ghost")
    ) {
      try stories.create(in: larder) { $0.writerID = "ghost" }
    }
    #expect(try larder.models.find(Writer.self, id: "writer-2") == nil)
    #expect(try larder.models.query(Query(Story.self)).map(\.id) == ["story-1"])
    // The relation is real: deleting the writer cascades.
    #expect(try larder.models.delete(Writer.self, id: "writer-1"))
    #expect(try larder.models.query(Query(Story.self)).isEmpty)
  }
}
