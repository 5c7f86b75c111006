import Foundation
import LarderTestSupport
import Testing

@testable import Larder

// Model types whose references cover every rule, a second level, a nested field and a cycle.
private struct Author: Model, Equatable {
  var id: String
  var name: String
}

private struct Series: Model, Equatable {
  var id: String
}

private struct Article: Model, Equatable {
  var id: String
  var authorID: String
  var editorID: String?
  var seriesID: String?
  var cover: File?
  static let references = [
    ModelReference("authorID", to: Author.self, onDelete: .cascade),
    ModelReference("editorID", to: Author.self, onDelete: .nullify),
    ModelReference("seriesID", to: Series.self, onDelete: .restrict),
  ]
}

/// The second level of a cascade: an author's articles take their comments.
private struct Comment: Model, Equatable {
  var id: String
  var articleID: String
  var text: String
  static let references = [ModelReference("articleID", to: Article.self, onDelete: .cascade)]
}

/// Refuses its article's deletion, however the deletion was reached.
private struct Review: Model, Equatable {
  var id: String
  var articleID: String
  static let references = [ModelReference("articleID", to: Article.self, onDelete: .restrict)]
}

private struct Ring: Model, Equatable {
  var id: String
  var nextID: String?
  static let references = [ModelReference("nextID", to: Ring.self, onDelete: .cascade)]
}

private struct Owner: Codable, Sendable, Equatable {
  var ownerID: String?
  var since: Int
}

private struct Badge: Model, Equatable {
  var id: String
  var owner: Owner
  static let references = [ModelReference("owner.ownerID", to: Author.self, onDelete: .nullify)]
}

private struct NumericAuthor: Model {
  var id: String
  var authorID: Int
  static let references = [ModelReference("authorID", to: Author.self)]
}

private struct Twice: Model {
  var id: String
  var authorID: String
  static let references = [
    ModelReference("authorID", to: Author.self),
    ModelReference("authorID", to: Author.self, onDelete: .cascade),
  ]
}

@Suite struct ReferenceTests {
  private func referenceRows(_ larder: Larder) throws -> Set<String> {
    try larder.catalog.read { db in
      Set(
        try db.rows(
          "SELECT record_type, record_id, property, target_type, target_id, on_delete FROM model_references"
        )
        .map {
          "\($0.string("record_type")!)/\($0.string("record_id")!).\($0.string("property")!)"
            + "->\($0.string("target_type")!)/\($0.string("target_id")!) \($0.string("on_delete")!)"
        })
    }
  }

  @Test func savingAReferenceToAMissingModelIsRefusedAndSavesNothing() throws {
    let larder = try TestStore.temporary()
    #expect(
      throws: ModelError.referenceNotFound(
        type: "Article", id: "p1", field: "authorID", targetType: "Author", targetID: "nobody")
    ) { try larder.models.save(Article(id: "p1", authorID: "nobody")) }
    #expect(try larder.models.find(Article.self, id: "p1") == nil)
    #expect(try larder.recordCount() == 0)

    // Earlier in the same transaction counts; the other way round the whole transaction rolls back.
    try larder.write { tx in
      try tx.save(Author(id: "a1", name: "Ada"))
      try tx.save(Article(id: "p1", authorID: "a1", editorID: "a1"))
    }
    #expect(
      throws: ModelError.referenceNotFound(
        type: "Article", id: "p2", field: "authorID", targetType: "Author", targetID: "a2")
    ) {
      try larder.write { tx in
        try tx.save(Article(id: "p2", authorID: "a2"))
        try tx.save(Author(id: "a2", name: "Alan"))
      }
    }
    #expect(try larder.models.find(Author.self, id: "a2") == nil)
    #expect(try larder.recordCount() == 2)
    #expect(
      try referenceRows(larder) == [
        "Article/p1.authorID->Author/a1 cascade", "Article/p1.editorID->Author/a1 nullify",
      ])
  }

  @Test func aFieldThatIsNotAnIdStringOrADoubleDeclarationIsRefused() throws {
    let larder = try TestStore.temporary()
    try larder.models.save(Author(id: "1", name: "one"))
    #expect(throws: ModelError.invalidReference(type: "NumericAuthor", id: "c", field: "authorID")) {
      try larder.models.save(NumericAuthor(id: "c", authorID: 1))
    }
    #expect(throws: ModelError.invalidQuery("Twice declares the reference 'authorID' twice")) {
      try larder.models.save(Twice(id: "t", authorID: "1"))
    }
    #expect(try larder.recordCount() == 1)
  }

  @Test func cascadeDeletesTwoLevelsAndReleasesTheirFiles() throws {
    let larder = try TestStore.temporary()
    let covers = try (0..<3).map { try larder.files.put(Data("cover \($0)".utf8)) }
    try larder.write { tx in
      try tx.save(Author(id: "a1", name: "Ada"))
      try tx.save(Author(id: "a2", name: "Alan"))
      try tx.save(Article(id: "p1", authorID: "a1", cover: covers[0]))
      try tx.save(Article(id: "p2", authorID: "a1", cover: covers[1]))
      try tx.save(Article(id: "p3", authorID: "a2", cover: covers[2]))
      for (article, n) in [("p1", 3), ("p2", 2), ("p3", 1)] {
        for i in 0..<n { try tx.save(Comment(id: "\(article)-c\(i)", articleID: article, text: "#\(i)")) }
      }
    }
    #expect(try larder.recordCount() == 2 + 3 + 6)
    #expect(try larder.unreferencedFileIDs().isDisjoint(with: covers.map(\.id)))

    #expect(try larder.models.delete(Author.self, id: "a1"))
    #expect(try larder.models.query(Query(Article.self)).map(\.id) == ["p3"])
    #expect(try larder.models.query(Query(Comment.self)).map(\.id) == ["p3-c0"])
    #expect(try larder.models.query(Query(Author.self)).map(\.id) == ["a2"])
    #expect(try larder.unreferencedFileIDs().intersection(covers.map(\.id)) == [covers[0].id, covers[1].id])
    #expect(
      try referenceRows(larder) == [
        "Article/p3.authorID->Author/a2 cascade", "Comment/p3-c0.articleID->Article/p3 cascade",
      ])
    #expect(try larder.foreignKeyProblems() == 0)

    // The collector then removes the released covers' files, and only those.
    let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(report.filesReleased == 2)
    #expect(try larder.files.file(id: covers[0].id) == nil)
    #expect(try larder.files.file(id: covers[2].id) != nil)
  }

  @Test func nullifySetsTheFieldToNullAndKeepsTheModel() throws {
    let larder = try TestStore.temporary()
    try larder.write { tx in
      try tx.save(Author(id: "writer", name: "W"))
      try tx.save(Author(id: "editor", name: "E"))
      try tx.save(Article(id: "p1", authorID: "writer", editorID: "editor"))
      try tx.save(Article(id: "p2", authorID: "editor", editorID: "writer"))
      try tx.save(Badge(id: "b1", owner: Owner(ownerID: "editor", since: 2020)))
    }
    #expect(try larder.models.delete(Author.self, id: "editor"))
    // p1 loses its editor; p2 was the editor's own article (cascade); the badge keeps its other fields.
    #expect(
      try larder.models.query(Query(Article.self)) == [Article(id: "p1", authorID: "writer", editorID: nil)])
    #expect(
      try larder.models.find(Badge.self, id: "b1") == Badge(id: "b1", owner: Owner(ownerID: nil, since: 2020))
    )
    #expect(try referenceRows(larder) == ["Article/p1.authorID->Author/writer cascade"])
    #expect(try larder.foreignKeyProblems() == 0)
  }

  @Test func restrictRefusesTheWholeDeleteEvenThroughACascadeAndChangesNothing() throws {
    let larder = try TestStore.temporary()
    try larder.write { tx in
      try tx.save(Series(id: "s1"))
      try tx.save(Author(id: "a1", name: "Ada"))
      try tx.save(Author(id: "ed", name: "Ed"))
      try tx.save(Article(id: "p1", authorID: "a1", seriesID: "s1"))
      try tx.save(Article(id: "p2", authorID: "ed", editorID: "a1"))
      try tx.save(Review(id: "r1", articleID: "p1"))
    }
    let before = try referenceRows(larder)
    #expect(
      throws: ModelError.deleteRestricted(
        type: "Series", id: "s1", referrerType: "Article", referrerID: "p1", field: "seriesID")
    ) { try larder.models.delete(Series.self, id: "s1") }
    // Deleting a1 would cascade to p1, which r1 restricts: nothing happens, not even p2's nullify.
    #expect(
      throws: ModelError.deleteRestricted(
        type: "Article", id: "p1", referrerType: "Review", referrerID: "r1", field: "articleID")
    ) { try larder.models.delete(Author.self, id: "a1") }
    #expect(try larder.recordCount() == 6)
    #expect(try larder.models.find(Article.self, id: "p2")?.editorID == "a1")
    #expect(try referenceRows(larder) == before)

    // A refusal caught inside a transaction has changed nothing either: the rest commits.
    try larder.write { tx in
      #expect(throws: ModelError.self) { try tx.delete(Author.self, id: "a1") }
      try tx.save(Series(id: "s2"))
    }
    #expect(try larder.models.find(Article.self, id: "p2")?.editorID == "a1")
    #expect(try larder.recordCount() == 7)

    // Once the review goes, the cascade goes through, and with p1 gone nothing holds the series.
    #expect(try larder.models.delete(Review.self, id: "r1"))
    #expect(try larder.models.delete(Author.self, id: "a1"))
    #expect(try larder.models.find(Article.self, id: "p1") == nil)
    #expect(try larder.models.find(Article.self, id: "p2")?.editorID == nil)
    #expect(try larder.models.delete(Series.self, id: "s1"))
  }

  @Test func cascadesThroughACycleEndAndASelfReferenceDeletes() throws {
    let larder = try TestStore.temporary()
    try larder.write { tx in
      try tx.save(Ring(id: "r1"))
      try tx.save(Ring(id: "r2", nextID: "r1"))
      try tx.save(Ring(id: "r3", nextID: "r2"))
      try tx.save(Ring(id: "r1", nextID: "r3"))  // r1 → r3 → r2 → r1
      try tx.save(Ring(id: "me", nextID: "me"))
      try tx.save(Ring(id: "alone"))
    }
    #expect(try larder.models.delete(Ring.self, id: "r2"))
    #expect(try larder.models.query(Query(Ring.self)).map(\.id).sorted() == ["alone", "me"])
    #expect(try larder.models.delete(Ring.self, id: "me"))
    #expect(try larder.models.query(Query(Ring.self)).map(\.id) == ["alone"])
    #expect(try referenceRows(larder).isEmpty)
  }

  @Test func aResaveMovesTheReference() throws {
    let larder = try TestStore.temporary()
    try larder.write { tx in
      try tx.save(Author(id: "a1", name: "Ada"))
      try tx.save(Author(id: "a2", name: "Alan"))
      try tx.save(Article(id: "p1", authorID: "a1"))
    }
    try larder.models.save(Article(id: "p1", authorID: "a2"))
    #expect(try larder.models.delete(Author.self, id: "a1"))
    #expect(try larder.models.find(Article.self, id: "p1")?.authorID == "a2")
    #expect(try larder.models.delete(Author.self, id: "a2"))
    #expect(try larder.models.find(Article.self, id: "p1") == nil)
  }

  /// The catalog's own foreign key keeps a referenced model even from SQL that bypasses
  /// `ModelTransaction` (another program on the same catalog).
  @Test func theCatalogRefusesARawDeleteOfAReferencedModel() throws {
    let larder = try TestStore.temporary()
    try larder.write { tx in
      try tx.save(Author(id: "a1", name: "Ada"))
      try tx.save(Article(id: "p1", authorID: "a1"))
    }
    #expect(throws: DatabaseError.self) {
      try larder.catalog.write { db in try db.execute("DELETE FROM records WHERE type = 'Author'") }
    }
    #expect(try larder.recordCount() == 2)
  }

  /// Observers of the types a cascade or a nullify touched hear of it.
  @Test func observersOfCascadedAndNullifiedTypesAreTold() async throws {
    let larder = try TestStore.temporary()
    try larder.write { tx in
      try tx.save(Author(id: "a1", name: "Ada"))
      try tx.save(Author(id: "a2", name: "Alan"))
      try tx.save(Article(id: "p1", authorID: "a1"))
      try tx.save(Article(id: "p2", authorID: "a2", editorID: "a1"))
    }
    var articles = try larder.models.observations(of: Query(Article.self).sorted(by: "id"))
      .makeAsyncIterator()
    guard case .initial(let first) = await articles.next() else {
      Issue.record("no initial")
      return
    }
    #expect(first.map(\.id) == ["p1", "p2"])
    #expect(try larder.models.delete(Author.self, id: "a1"))
    guard case .update(let rows, let deletions, let insertions, let modifications) = await articles.next()
    else {
      Issue.record("no update")
      return
    }
    #expect(rows == [Article(id: "p2", authorID: "a2", editorID: nil)])
    #expect((deletions, insertions, modifications) == ([0], [], [0]))
  }
}
