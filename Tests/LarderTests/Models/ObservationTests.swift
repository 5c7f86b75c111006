import Foundation
import LarderTestSupport
import Testing

@testable import Larder

struct Score: Model, Equatable {
  var id: String
  var name: String
  var points: Int
  var visible: Bool
}

@Suite struct ObservationTests {
  /// Applies an update the way a table view would, independently of `ModelChange.applied(to:)`.
  func apply(_ change: ModelChange<Score>, to previous: [Score]) -> [Score] {
    guard case .update(let results, let deletions, let insertions, let modifications) = change else {
      return change.results
    }
    var array = previous
    for i in deletions.sorted(by: >) { array.remove(at: i) }
    for i in insertions.sorted() { array.insert(results[i], at: i) }
    for i in modifications { array[i] = results[i] }
    return array
  }

  func reference(_ all: [String: Score], limit: Int) -> [Score] {
    let visible = all.values.filter(\.visible).sorted {
      ($0.points, $1.name, $0.id) > ($1.points, $0.name, $1.id)
    }
    return Array(visible.prefix(limit))
  }

  @Test func randomisedChangesApplyExactlyToThePreviousResult() async throws {
    let larder = try TestStore.temporary()
    let query = Query(Score.self).filter(Field("visible") == true)
      .sorted(by: "points", .descending).sorted(by: "name").limit(12)
    var rng = SeededGenerator(seed: 0x5EED_0006)
    var all: [String: Score] = [:]
    for i in 0..<10 {
      let s = Score(id: "s\(i)", name: "n\(Int.random(in: 0..<20, using: &rng))", points: Int.random(in: 0..<30, using: &rng), visible: Bool.random(using: &rng))
      all[s.id] = s
    }
    try larder.models.save(Array(all.values))

    let log = ChangeLog<Score>()
    let consumer = log.consume(try larder.models.observations(of: query))
    defer { consumer.cancel() }
    var changes = await log.wait(forCount: 1)
    try #require(changes.count == 1)
    guard case .initial(let initial) = changes[0] else { Issue.record("first change is not .initial"); return }
    #expect(initial == reference(all, limit: 12))

    var current = initial
    var nextID = 10
    var updates = 0
    var sawKinds = (deletions: false, insertions: false, modifications: false)
    for _ in 0..<250 {
      let before = reference(all, limit: 12)
      let roll = Int.random(in: 0..<10, using: &rng)
      if roll < 3 || all.isEmpty {
        let s = Score(id: "s\(nextID)", name: "n\(Int.random(in: 0..<20, using: &rng))", points: Int.random(in: 0..<30, using: &rng), visible: Bool.random(using: &rng))
        nextID += 1
        all[s.id] = s
        try larder.models.save(s)
      } else if roll < 8 {
        var s = all.values.sorted { $0.id < $1.id }.randomElement(using: &rng)!
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: s.points = Int.random(in: 0..<30, using: &rng)  // reorders
        case 1: s.name = "n\(Int.random(in: 0..<20, using: &rng))"  // reorders among ties
        case 2: s.visible.toggle()  // enters or leaves
        default: s.points += 0; s.name += ""  // same body: no change at all
        }
        all[s.id] = s
        try larder.models.save(s)
      } else {
        let id = all.keys.sorted().randomElement(using: &rng)!
        all[id] = nil
        #expect(try larder.models.delete(Score.self, id: id))
      }
      let after = reference(all, limit: 12)
      guard after != before else { continue }
      updates += 1
      changes = await log.wait(forCount: updates + 1)
      try #require(changes.count == updates + 1, "no update delivered for a change of the result")
      let change = changes[updates]
      guard case .update(let results, let deletions, let insertions, let modifications) = change else {
        Issue.record("expected .update")
        return
      }
      #expect(results == after)
      #expect(apply(change, to: current) == after)
      #expect(change.applied(to: current) == after)
      #expect(deletions == deletions.sorted() && Set(deletions).count == deletions.count)
      #expect(insertions == insertions.sorted() && modifications == modifications.sorted())
      #expect(deletions.allSatisfy { current.indices.contains($0) })
      #expect(insertions.allSatisfy { after.indices.contains($0) } && modifications.allSatisfy { after.indices.contains($0) })
      #expect(Set(insertions).isDisjoint(with: modifications))
      sawKinds.deletions = sawKinds.deletions || !deletions.isEmpty
      sawKinds.insertions = sawKinds.insertions || !insertions.isEmpty
      sawKinds.modifications = sawKinds.modifications || !modifications.isEmpty
      current = after
    }
    #expect(updates > 100)
    #expect(sawKinds.deletions && sawKinds.insertions && sawKinds.modifications)
    // Nothing was delivered that the reference did not predict.
    #expect(log.all.count == updates + 1)
  }

  @Test func diffKeepsTheLongestOrderedRunAndMarksModifications() {
    func rows(_ s: String) -> [(id: String, body: String)] {
      s.split(separator: " ").map { part in
        let p = part.split(separator: ":")
        return (String(p[0]), p.count > 1 ? String(p[1]) : "")
      }
    }
    // b moved to the end: one deletion and one insertion, a/c/d kept, c modified.
    let diff = ResultDiff.between(old: rows("a b c d"), new: rows("a c:x d b"))
    #expect(diff == ResultDiff(deletions: [1], insertions: [3], modifications: [1]))
    #expect(ResultDiff.between(old: rows("a b"), new: rows("a b")).isEmpty)
    #expect(ResultDiff.between(old: [], new: rows("a b")) == ResultDiff(deletions: [], insertions: [0, 1], modifications: []))
    #expect(ResultDiff.between(old: rows("a b"), new: []) == ResultDiff(deletions: [0, 1], insertions: [], modifications: []))
    #expect(ResultDiff.between(old: rows("a b c"), new: rows("c b a")) == ResultDiff(deletions: [1, 2], insertions: [0, 1], modifications: []))
  }

  @Test func callbackStopsWhenTheTokenIsCancelledOrReleased() async throws {
    let larder = try TestStore.temporary()
    try larder.models.save(Score(id: "a", name: "a", points: 1, visible: true))
    let query = Query(Score.self).sorted(by: "points")
    #expect(larder.models.observerCount == 0)

    let log = ChangeLog<Score>()
    var token: ObservationToken? = try larder.models.observe(query) { log.append($0) }
    #expect(await log.wait(forCount: 1).count == 1)
    try larder.models.save(Score(id: "b", name: "b", points: 2, visible: true))
    let two = await log.wait(forCount: 2)
    try #require(two.count == 2)
    guard case .update(let results, [], [1], []) = two[1] else { Issue.record("unexpected \(two[1])"); return }
    #expect(results.map(\.id) == ["a", "b"])

    token?.cancel()
    #expect(token?.isCancelled == true)
    #expect(larder.models.observerCount == 0)
    // A second, live observer proves the next commit was delivered to whoever still listens.
    let witness = ChangeLog<Score>()
    let witnessToken = try larder.models.observe(query) { witness.append($0) }
    #expect(await witness.wait(forCount: 1).count == 1)
    try larder.models.save(Score(id: "c", name: "c", points: 3, visible: true))
    #expect(await witness.wait(forCount: 2).count == 2)
    #expect(log.all.count == 2)

    // Releasing a token ends its observation just like cancelling it.
    token = nil
    do {
      let scoped = try larder.models.observe(query) { _ in }
      #expect(larder.models.observerCount == 2)
      _ = scoped
    }
    #expect(larder.models.observerCount == 1)
    witnessToken.cancel()
    #expect(larder.models.observerCount == 0)
    _ = token
  }

  @Test func asyncSequenceDeliversAndEndsWithItsConsumer() async throws {
    let larder = try TestStore.temporary()
    let query = Query(Score.self).filter(Field("points") >= 10).sorted(by: "points")
    do {
      var iterator = try larder.models.observations(of: query).makeAsyncIterator()
      guard case .initial(let first) = await iterator.next() else { Issue.record("no initial"); return }
      #expect(first.isEmpty)
      #expect(larder.models.observerCount == 1)
      try larder.write { tx in
        try tx.save(Score(id: "low", name: "l", points: 1, visible: true))
        try tx.save(Score(id: "high", name: "h", points: 20, visible: true))
        try tx.save(Score(id: "mid", name: "m", points: 10, visible: true))
      }
      // One commit, one update, whatever the number of saves in it.
      guard case .update(let results, [], [0, 1], []) = await iterator.next() else { Issue.record("no update"); return }
      #expect(results.map(\.id) == ["mid", "high"])
      try larder.models.save(Score(id: "mid", name: "m2", points: 10, visible: true))
      let modified = await iterator.next()
      guard case .update(_, [], [], [0]) = modified else { Issue.record("no modification: \(String(describing: modified))"); return }
      try larder.models.save(Score(id: "mid", name: "m2", points: 30, visible: true))
      // mid moved past high and changed: the longest kept run is [mid], so high is deleted and
      // re-inserted, and mid (kept) is a modification.
      let move = await iterator.next()
      guard case .update(let moved, [1], [0], [1]) = move else { Issue.record("no move: \(String(describing: move))"); return }
      #expect(moved.map(\.id) == ["high", "mid"])
    }
    // The iterator is gone: the observation ended with it.
    #expect(await eventually { larder.models.observerCount == 0 })
  }

  @Test func invalidQueriesFailBeforeObserving() throws {
    let larder = try TestStore.temporary()
    #expect(throws: ModelError.invalidFieldPath("a b")) {
      _ = try larder.models.observe(Query(Score.self).sorted(by: "a b")) { _ in }
    }
    #expect(larder.models.observerCount == 0)
  }
}
