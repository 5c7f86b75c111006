import Foundation
import LarderTestSupport
import Synchronization
import Testing

@testable import Larder

private struct Chore: Model, Equatable {
  var id: String
  var list: String
  var title: String
  var done = false
}

/// What a table view checks of a batch update (UIKit raises on any of these), and the table
/// model's result after it: applying every change set in order must give the fresh query.
private func checkAsATableView(
  _ changes: ResultsChangeSet, old: [ResultsSection<Chore>], new: [ResultsSection<Chore>]
)
  -> [String]
{
  var problems: [String] = []
  let deleted = Set(changes.sectionDeletions)
  let inserted = Set(changes.sectionInsertions)
  if deleted.count != changes.sectionDeletions.count
    || changes.sectionDeletions.contains(where: { !old.indices.contains($0) })
  {
    problems.append("bad section deletions \(changes.sectionDeletions)")
  }
  if inserted.count != changes.sectionInsertions.count
    || changes.sectionInsertions.contains(where: { !new.indices.contains($0) })
  {
    problems.append("bad section insertions \(changes.sectionInsertions)")
  }
  let fromOld = changes.rowDeletions + changes.rowMoves.map(\.from) + changes.rowUpdates
  let intoNew = changes.rowInsertions + changes.rowMoves.map(\.to)
  if Set(fromOld).count != fromOld.count { problems.append("an old row is touched twice") }
  if Set(intoNew).count != intoNew.count { problems.append("a new row is filled twice") }
  for p in fromOld
  where !old.indices.contains(p.section) || deleted.contains(p.section)
    || !old[p.section].models.indices.contains(p.row)
  {
    problems.append("old path \(p) is not in a staying section")
  }
  for p in intoNew
  where !new.indices.contains(p.section) || inserted.contains(p.section)
    || !new[p.section].models.indices.contains(p.row)
  {
    problems.append("new path \(p) is not in a staying section")
  }
  // Staying sections pair up in order; each one's row count must add up.
  let stayingOld = old.indices.filter { !deleted.contains($0) }
  let stayingNew = new.indices.filter { !inserted.contains($0) }
  guard stayingOld.count == stayingNew.count else {
    return problems + ["\(stayingOld.count) staying old sections, \(stayingNew.count) new"]
  }
  for (i, j) in zip(stayingOld, stayingNew) {
    if old[i].key != new[j].key { problems.append("section \(i) becomes \(j) with another key") }
    let out =
      changes.rowDeletions.filter { $0.section == i }.count
      + changes.rowMoves.filter { $0.from.section == i }.count
    let into =
      changes.rowInsertions.filter { $0.section == j }.count
      + changes.rowMoves.filter { $0.to.section == j }.count
    if old[i].models.count - out + into != new[j].models.count {
      problems.append("section \(old[i].key): counts do not add up")
    }
  }
  return problems
}

private func flat(_ sections: [ResultsSection<Chore>]) -> [String] {
  sections.flatMap { s in ["#" + s.key] + s.models.map { "\($0.id):\($0.list):\($0.title):\($0.done)" } }
}

@Suite struct ResultsControllerTests {
  fileprivate static let query = Query(Chore.self).sorted(by: "list").sorted(by: "title")

  /// Seeded random rounds of inserts, deletes, renames (moves in a section), list changes
  /// (moves between sections, sections appearing and emptying) and plain updates; each round's
  /// change set passes a table view's checks and, applied, gives the fresh query's sections.
  @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64]) func changeSetsApplyToATableModel(seed: UInt64)
    throws
  {
    let larder = try TestStore.temporary()
    var rng = SeededGenerator(seed: seed)
    let lists = ["a", "b", "c", "d", "e"]
    var table: [ResultsSection<Chore>] = []
    var next = 0
    var sawMoves = 0
    var sawSectionChanges = 0
    for round in 0..<150 {
      let existing = try larder.models.query(Query(Chore.self))
      try larder.write { tx in
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
          let pick = existing.randomElement(using: &rng)
          switch (Int.random(in: 0..<6, using: &rng), pick) {
          case (0, _), (_, nil):
            next += 1
            try tx.save(
              Chore(
                id: "t\(next)", list: lists.randomElement(using: &rng)!,
                title: "\(Int.random(in: 0..<50, using: &rng))"))
          case (1, let c?): try tx.delete(c)
          case (2, var c?):
            c.title = "\(Int.random(in: 0..<50, using: &rng))"
            try tx.save(c)
          case (3, var c?):
            c.list = lists.randomElement(using: &rng)!
            try tx.save(c)
          case (_, var c?):
            c.done.toggle()
            try tx.save(c)
          }
        }
      }
      let fresh = ResultsSection.group(try larder.models.query(Self.query), by: \.list)
      let changes = ResultsChangeSet.between(old: table, new: fresh)
      let problems = checkAsATableView(changes, old: table, new: fresh)
      #expect(problems.isEmpty, "seed \(seed) round \(round): \(problems)")
      let applied = ResultsChange.update(fresh, changes).applied(to: table)
      #expect(flat(applied) == flat(fresh), "seed \(seed) round \(round)")
      sawMoves += changes.rowMoves.count
      sawSectionChanges += changes.sectionDeletions.count + changes.sectionInsertions.count
      table = fresh
    }
    #expect(sawMoves > 0 && sawSectionChanges > 0, "the rounds exercised moves and section changes")
  }

  @Test func aMoveBetweenSectionsAndAnUpdateInPlace() throws {
    let old = ResultsSection.group(
      [
        Chore(id: "1", list: "a", title: "x"), Chore(id: "2", list: "a", title: "y"),
        Chore(id: "3", list: "b", title: "z"),
      ], by: \.list)
    let new = ResultsSection.group(
      [
        Chore(id: "1", list: "a", title: "x", done: true), Chore(id: "3", list: "b", title: "z"),
        Chore(id: "2", list: "b", title: "zz"),
      ],
      by: \.list)
    let changes = ResultsChangeSet.between(old: old, new: new)
    #expect(
      changes
        == ResultsChangeSet(
          rowMoves: [
            .init(from: ResultsIndexPath(section: 0, row: 1), to: ResultsIndexPath(section: 1, row: 1))
          ],
          rowUpdates: [ResultsIndexPath(section: 0, row: 0)]))
    // A section that empties is deleted with its rows; one that appears is inserted with them.
    let emptied = ResultsSection.group(
      [Chore(id: "3", list: "b", title: "z"), Chore(id: "4", list: "c", title: "w")], by: \.list)
    let second = ResultsChangeSet.between(old: old, new: emptied)
    #expect(second == ResultsChangeSet(sectionDeletions: [0], sectionInsertions: [1]))
    #expect(flat(ResultsChange.update(emptied, second).applied(to: old)) == flat(emptied))
  }

  /// The live controller: every delivered change set, applied in order from the initial
  /// sections, gives the final fresh query, with commits from several tasks.
  @Test func theControllerDeliversChangeSetsThatReplayToTheFreshQuery() async throws {
    let larder = try TestStore.temporary()
    let delivered = Mutex<[ResultsChange<Chore>]>([])
    let controller = try ModelResultsController(larder.models, query: Self.query, sectionBy: { $0.list }) {
      change in
      delivered.withLock { $0.append(change) }
    }
    defer { controller.cancel() }
    try await withThrowingTaskGroup(of: Void.self) { group in
      for worker in 0..<4 {
        group.addTask {
          var rng = SeededGenerator(seed: UInt64(worker) + 40)
          for step in 0..<60 {
            let id = "w\(worker)-\(Int.random(in: 0..<10, using: &rng))"
            if Int.random(in: 0..<4, using: &rng) == 0 {
              try larder.models.delete(Chore.self, id: id)
            } else {
              try larder.models.save(
                Chore(
                  id: id, list: ["a", "b", "c"].randomElement(using: &rng)!, title: "\(step % 13)",
                  done: step % 2 == 0))
            }
          }
        }
      }
      try await group.waitForAll()
    }
    let fresh = ResultsSection.group(try larder.models.query(Self.query), by: \.list)
    // Waits for the delivery itself, not `controller.sections`: those are set just before the
    // handler is called, so reading the deliveries as soon as they match could miss the last one.
    let deadline = ContinuousClock.now + .seconds(20)
    while delivered.withLock({ $0.last.map { flat($0.sections) } }) != flat(fresh), ContinuousClock.now < deadline {
      try await Task.sleep(for: .milliseconds(20))
    }
    #expect(flat(controller.sections) == flat(fresh))
    let changes = delivered.withLock { $0 }
    guard case .initial(let first)? = changes.first else {
      Issue.record("no initial delivery")
      return
    }
    var table = first
    for change in changes.dropFirst() {
      guard case .update(let sections, let set) = change else {
        Issue.record("a second initial")
        return
      }
      #expect(checkAsATableView(set, old: table, new: sections).isEmpty)
      table = change.applied(to: table)
      #expect(flat(table) == flat(sections))
    }
    #expect(flat(table) == flat(fresh))
    #expect(changes.count > 1)
  }
}
