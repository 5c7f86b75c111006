import Foundation
import LarderTestSupport
import Synchronization
import Testing

@testable import Larder

/// One observer that applies every delivered change to its own copy and checks it against the
/// delivered result as it goes.
private final class Follower<T: Model & Equatable>: Sendable {
  private final class State: Sendable {
    let value = Mutex<(rows: [T], deliveries: Int, mismatches: Int)>(([], 0, 0))
  }

  let query: Query<T>
  private let state = State()
  private let token: ObservationToken

  init(_ store: ModelStore, _ query: Query<T>) throws {
    self.query = query
    let state = self.state
    token = try store.observe(query) { change in
      state.value.withLock { s in
        if change.applied(to: s.rows) != change.results { s.mismatches += 1 }
        s.rows = change.results
        s.deliveries += 1
      }
    }
  }

  var rows: [T] { state.value.withLock { $0.rows } }
  var deliveries: Int { state.value.withLock { $0.deliveries } }
  var mismatches: Int { state.value.withLock { $0.mismatches } }
  func cancel() { token.cancel() }
}

/// Observation stays exact under concurrency, with references and across processes: observers
/// start while three in-process writers and two other processes (`larder-model-probe churn`)
/// commit saves, cascading and nulling deletes and links, 3,400 commits in all; at the end every
/// observer's last result equals a fresh query, and every change applied to the result before
/// it gave the delivered one.
@Suite struct ObservationStressTests {
  @Test func everyObserversLastResultIsTheFreshQuery() async throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let here = try TestStore.open(at: directory)
    let elsewhere = try TestStore.open(at: directory)
    let queries: [Query<ChurnTally>] = [
      Query(ChurnTally.self).sorted(by: "n").sorted(by: "id"),
      Query(ChurnTally.self).filter(Field("keeperID") == "k1"),
      Query(ChurnTally.self).filter(Field("n") >= 50).sorted(by: "n", .descending).limit(10),
      ModelChurn.follows.sources(of: "k2"),
    ]
    let early = try queries.map { try Follower(here.models, $0) }
    let keepers = try Follower(here.models, Query(ChurnKeeper.self).sorted(by: "n"))

    let probe = try CrossProcessObservationTests.executable("larder-model-probe")
    let env = CrossProcessObservationTests.environment(for: directory)
    let processes = try (1...2).map { seed in
      try Subprocess.spawn(
        probe, ["churn", directory.path, "1000", String(seed * 7919)], environment: env,
        stdoutPath: scratch.url.appendingPathComponent("churn\(seed).out").path,
        stderrPath: scratch.url.appendingPathComponent("churn\(seed).err").path)
    }
    // Late observers start from the writers' threads while everything commits: two writers
    // each start two, after 100 and 250 of their commits.
    let late = try await withThrowingTaskGroup(of: [Follower<ChurnTally>].self) { group in
      for worker in 0..<3 {
        group.addTask {
          var churn = ModelChurn(seed: UInt64(worker) + 1)
          var started: [Follower<ChurnTally>] = []
          for step in 0..<400 {
            if worker < 2, step == 100 || step == 250 {
              started.append(try Follower(elsewhere.models, queries[(worker * 2 + started.count) % queries.count]))
            }
            try churn.step(worker == 0 ? here : elsewhere)
          }
          return started
        }
      }
      var started: [Follower<ChurnTally>] = []
      for try await some in group { started += some }
      return started
    }
    for (i, pid) in processes.enumerated() {
      let status = try Subprocess.wait(pid, timeout: 300)
      let err =
        (try? String(contentsOf: scratch.url.appendingPathComponent("churn\(i + 1).err"), encoding: .utf8))
        ?? ""
      #expect(status == 0, "churn \(i + 1): \(err)")
    }

    let followers = early + late
    #expect(followers.count == 8)
    for follower in followers {
      let settled = try await eventually(seconds: 20) {
        try follower.deliveries > 0 && follower.rows == here.models.query(follower.query)
      }
      #expect(settled, "an observer's last result is not the fresh query: \(follower.query)")
      #expect(follower.mismatches == 0)
    }
    #expect(
      try await eventually(seconds: 20) {
        try keepers.deliveries > 0 && keepers.rows == here.models.query(Query(ChurnKeeper.self).sorted(by: "n"))
      })
    // The early ones saw the whole run change; a late one may start after its query's last change.
    #expect(early.allSatisfy { $0.deliveries > 1 }, "\(early.map(\.deliveries))")
    #expect(try here.foreignKeyProblems() == 0)
    followers.forEach { $0.cancel() }
    keepers.cancel()
  }
}
