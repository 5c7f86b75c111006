import Foundation
import LarderTestSupport
import Testing

@testable import Larder

private struct Member: Model, Equatable {
  var id: String
  var name: String
  static let indexes = [ModelIndex("name")]
}

private struct Entry: Model, Equatable {
  var id: String
  var title: String
  var memberID: String?
  static let references = [ModelReference("memberID", to: Member.self, onDelete: .cascade)]
}

private struct Tag: Model, Equatable {
  var id: String
}

/// Counts the statements run through it, for the eager-loading bound.
private final class CountingDatabase: Database {
  let base: Database
  var statements = 0
  init(_ base: Database) { self.base = base }
  var dialect: any SQLDialect { base.dialect }
  var changes: Int { base.changes }
  func execute(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) {
    statements += 1
    try base.execute(sql, arguments)
  }
  func executeScript(_ sql: String) throws(DatabaseError) {
    statements += 1
    try base.executeScript(sql)
  }
  func rows(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) -> [Row] {
    statements += 1
    return try base.rows(sql, arguments)
  }
  func row(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) -> Row? {
    statements += 1
    return try base.row(sql, arguments)
  }
  func forEachRow(_ sql: String, _ arguments: [any SQLBindable], _ body: (Row) throws -> Void) throws {
    statements += 1
    try base.forEachRow(sql, arguments, body)
  }
  func transaction<T>(immediate: Bool, _ body: (Database) throws -> T) throws -> T {
    try base.transaction(immediate: immediate) { _ in try body(self) }
  }
}

@Suite struct RelationTests {
  private let follows = ModelRelation<Member, Member>("follows")
  private let tagged = ModelRelation<Entry, Tag>("tagged")

  private func members(_ larder: Larder, _ names: [String]) throws {
    try larder.models.save(names.map { Member(id: $0, name: $0.capitalized) })
  }

  @Test func linksAddRemoveCountAndQueryFromEitherSide() throws {
    let larder = try TestStore.temporary()
    try members(larder, ["ada", "alan", "grace", "edsger"])
    #expect(try larder.models.link(follows, from: "ada", to: "alan"))
    #expect(try larder.models.link(follows, from: "ada", to: "grace"))
    #expect(try larder.models.link(follows, from: "grace", to: "alan"))
    #expect(try !larder.models.link(follows, from: "ada", to: "alan"))  // already linked
    #expect(try larder.models.isLinked(follows, from: "ada", to: "alan"))
    #expect(try !larder.models.isLinked(follows, from: "alan", to: "ada"))  // a direction
    #expect(try larder.models.count(follows, from: "ada") == 2)
    #expect(try larder.models.count(follows, to: "alan") == 2)
    #expect(try larder.models.count(follows, to: "ada") == 0)
    #expect(
      try larder.models.query(follows.targets(of: "ada").sorted(by: "name")).map(\.id) == ["alan", "grace"])
    #expect(
      try larder.models.query(follows.sources(of: "alan").sorted(by: "name")).map(\.id) == ["ada", "grace"])
    // Ordinary queries: filters, pages and counts compose with the link.
    #expect(
      try larder.models.query(follows.targets(of: "ada").filter(Field("name") == "Grace")).map(\.id) == [
        "grace"
      ])
    #expect(
      try larder.models.query(follows.sources(of: "alan").sorted(by: "name").limit(1).offset(1)).map(\.id)
        == ["grace"])
    #expect(try larder.models.count(follows.sources(of: "alan")) == 2)
    // Another relation between other types does not mix in.
    try larder.models.save(Entry(id: "e1", title: "t", memberID: "ada"))
    try larder.models.save(Tag(id: "swift"))
    #expect(try larder.models.link(tagged, from: "e1", to: "swift"))
    #expect(try larder.models.count(follows, from: "ada") == 2)
    #expect(try larder.models.query(tagged.sources(of: "swift")).map(\.id) == ["e1"])

    #expect(try larder.models.unlink(follows, from: "ada", to: "alan"))
    #expect(try !larder.models.unlink(follows, from: "ada", to: "alan"))
    #expect(try larder.models.query(follows.targets(of: "ada")).map(\.id) == ["grace"])
  }

  @Test func aLinkNeedsBothEndsAndGoesWithEither() throws {
    let larder = try TestStore.temporary()
    try members(larder, ["ada", "alan"])
    #expect(throws: ModelError.linkEndNotFound(relation: "follows", type: "Member", id: "nobody")) {
      try larder.models.link(follows, from: "ada", to: "nobody")
    }
    #expect(try larder.models.count(follows, from: "ada") == 0)
    try larder.models.link(follows, from: "ada", to: "alan")
    try larder.models.link(follows, from: "alan", to: "ada")
    #expect(try larder.models.delete(Member.self, id: "alan"))
    #expect(try larder.models.count(follows, from: "ada") == 0)
    #expect(try larder.models.count(follows, to: "ada") == 0)
    #expect(try larder.catalog.read { try $0.row("SELECT count(*) AS n FROM model_links")?.int("n") } == 0)
  }

  /// A link tells the observers of the linked types; the linked query's result moves.
  @Test func observersOfALinkedQuerySeeLinksAndUnlinks() async throws {
    let larder = try TestStore.temporary()
    try members(larder, ["ada", "alan", "grace"])
    var following = try larder.models.observations(of: follows.targets(of: "ada").sorted(by: "name"))
      .makeAsyncIterator()
    guard case .initial(let first) = await following.next() else {
      Issue.record("no initial")
      return
    }
    #expect(first.isEmpty)
    try larder.models.link(follows, from: "ada", to: "grace")
    guard case .update(let rows, [], [0], []) = await following.next() else {
      Issue.record("no insertion")
      return
    }
    #expect(rows.map(\.id) == ["grace"])
    try larder.write { tx in
      try tx.link(follows, from: "ada", to: "alan")
      try tx.unlink(follows, from: "ada", to: "grace")
    }
    guard case .update(let after, [0], [0], []) = await following.next() else {
      Issue.record("no move")
      return
    }
    #expect(after.map(\.id) == ["alan"])
  }

  /// 1,000 entries with their members: two statements, whatever the count; the same answer
  /// as one find per row.
  @Test func eagerLoadingRunsTwoStatementsForAThousandRows() throws {
    let larder = try TestStore.temporary()
    try members(larder, (0..<50).map { "m\($0)" })
    try larder.models.save(
      (0..<1000).map { i in
        Entry(id: String(format: "e%04d", i), title: "#\(i)", memberID: i % 7 == 0 ? nil : "m\(i % 50)")
      })
    let query = Query(Entry.self).sorted(by: "title").limit(1000)
    let compiled = try QuerySQL.select("id, body", query, dialect: larder.catalog.dialect)
    let (loaded, statements) = try larder.catalog.read { db in
      let counting = CountingDatabase(db)
      let loaded: [(model: Entry, included: Member?)] = try ModelStore.including(
        compiled, field: "memberID", Member.self, in: counting)
      return (loaded, counting.statements)
    }
    #expect(statements == 2)
    #expect(loaded.count == 1000)
    for (entry, member) in loaded {
      #expect(member == (try entry.memberID.flatMap { try larder.models.find(Member.self, id: $0) }))
    }
    #expect(loaded.filter { $0.included == nil }.count == 143)  // 0, 7, …, 994
    // The public form gives the same rows, and inside a transaction too.
    let viaStore = try larder.models.query(query, including: "memberID", Member.self)
    #expect(viaStore.map(\.model) == loaded.map(\.model))
    #expect(viaStore.map(\.included) == loaded.map(\.included))
    let inTransaction = try larder.write { tx in
      try tx.query(query.limit(3), including: "memberID", Member.self)
    }
    #expect(inTransaction.map(\.model.id) == ["e0000", "e0001", "e0010"])
    #expect(inTransaction.map { $0.included?.id } == [nil, "m1", "m10"])
    // A field that is not an id string is refused, not guessed.
    try larder.models.save(Reading(id: "r1", sensor: "s", value: 3))
    #expect(throws: ModelError.invalidReference(type: "Reading", id: "r1", field: "value")) {
      try larder.models.query(Query(Reading.self), including: "value", Member.self)
    }
  }
}
