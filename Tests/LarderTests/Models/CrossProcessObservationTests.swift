import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// The model `larder-model-probe` commits (Tests/Executables/larder-model-probe).
struct Ping: Model, Equatable {
  var id: String
  var seq: Int
  var sentAt: UInt64
}

/// Observation hears commits made by other stores and other processes on the same data
/// directory: on SQLite through the WAL-index commit stamp, on PostgreSQL through
/// `LISTEN/NOTIFY`. The second process is a real one: `larder-model-probe` saving models, and
/// the `larder` CLI writing an object.
@Suite struct CrossProcessObservationTests {
  /// An executable built beside this test bundle (`swift build --build-tests` builds them all).
  static func executable(_ name: String) throws -> String {
    let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    let path = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent(name).path
    guard FileManager.default.isExecutableFile(atPath: path) else {
      throw HarnessFailure("\(path) is missing; build it with `swift build --build-tests`")
    }
    return path
  }

  static func environment(for directory: URL) -> [String: String] {
    var env = ProcessInfo.processInfo.environment.filter {
      !$0.key.hasPrefix("LARDER_") || $0.key == "LARDER_TEST_CATALOG"
    }
    for (key, value) in TestStore.processEnvironment(for: directory) { env[key] = value }
    return env
  }

  /// Runs `larder-model-probe write DIR COUNT 0`: COUNT commits of one `Ping` each.
  static func probeWrites(_ count: Int, in directory: URL) throws {
    let result = try Subprocess.run(
      try executable("larder-model-probe"), ["write", directory.path, String(count), "0"],
      environment: environment(for: directory))
    try #require(result.status == 0, "\(result)")
    #expect(result.stdout == "wrote \(count)\n")
  }

  @Test func aCommitThroughAnotherStoreReachesThisStoresObserver() async throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let here = try TestStore.open(at: directory)
    let elsewhere = try TestStore.open(at: directory)  // its own connections, as another process has
    try here.models.save(Score(id: "a", name: "Ada", points: 3, visible: true))

    let log = ChangeLog<Score>()
    let consumer = log.consume(
      try here.models.observations(of: Query(Score.self).sorted(by: "points", .descending)))
    defer { consumer.cancel() }
    let initial = await log.wait(forCount: 1)
    #expect(initial.first?.results.map(\.id) == ["a"])

    try elsewhere.models.save(Score(id: "b", name: "Bo", points: 9, visible: true))
    let afterInsert = await log.wait(forCount: 2)
    try #require(afterInsert.count >= 2)
    #expect(afterInsert.last?.results.map(\.id) == ["b", "a"])
    guard case .update(_, let deletions, let insertions, let modifications) = afterInsert.last! else {
      Issue.record("not an update: \(afterInsert)")
      return
    }
    #expect((deletions, insertions, modifications) == ([], [0], []))

    // A rolled-back write announces nothing (its NOTIFY is discarded with it; on SQLite the
    // stamp does not move, and a refresh would find nothing new anyway).
    struct Abort: Error {}
    #expect(throws: Abort.self) {
      try elsewhere.write { tx in
        try tx.save(Score(id: "c", name: "Cy", points: 1, visible: true))
        throw Abort()
      }
    }
    _ = try elsewhere.models.delete(Score.self, id: "a")
    let afterDelete = await log.wait(forCount: 3)
    #expect(afterDelete.count == 3)
    #expect(afterDelete.last?.results.map(\.id) == ["b"])
  }

  @Test func modelsCommittedByAnotherProcessReachTheObserver() async throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let here = try TestStore.open(at: directory)
    let log = ChangeLog<Ping>()
    let consumer = log.consume(try here.models.observations(of: Query(Ping.self).sorted(by: "seq")))
    defer { consumer.cancel() }
    #expect(await log.wait(forCount: 1).first?.results == [])

    try Self.probeWrites(50, in: directory)
    let expected = (0..<50).map { "p\($0)" }
    #expect(await eventually { log.all.last?.results.map(\.id) == expected })
    let changes = log.all
    // Every delivery is a real change: each adds pings (50 commits, perhaps fewer deliveries,
    // since commits that land between two readings of the stamp arrive together).
    let sizes = changes.map(\.results.count)
    #expect(sizes == sizes.sorted() && Set(sizes).count == sizes.count)
    #expect(changes.count >= 2 && changes.count <= 51)
    #expect(changes.last?.results == (try here.models.query(Query(Ping.self).sorted(by: "seq"))))
  }

  @Test func anObjectWrittenByTheCLIDeliversNothingAndAModelAfterItArrives() async throws {
    let scratch = try StoreScratch()
    let directory = scratch.url.appendingPathComponent("data")
    let here = try TestStore.open(at: directory)
    let log = ChangeLog<Ping>()
    let consumer = log.consume(try here.models.observations(of: Query(Ping.self)))
    defer { consumer.cancel() }
    #expect(await log.wait(forCount: 1).count == 1)

    let source = scratch.url.appendingPathComponent("hello.txt")
    try Data("hello\n".utf8).write(to: source)
    let put = try Subprocess.run(
      try Self.executable("larder"), ["put", source.path, "bkt/hello.txt", "--data", directory.path],
      environment: Self.environment(for: directory))
    try #require(put.status == 0, "\(put)")
    #expect(try here.objects.find(bucket: "bkt", name: "hello.txt")?.file.size == 6)

    // The object's commit woke the observer (on SQLite), whose query found nothing new; the
    // model committed next is the one change delivered after the initial result.
    try Self.probeWrites(1, in: directory)
    #expect(await eventually { log.all.count == 2 })
    try await Task.sleep(for: .milliseconds(100))
    let changes = log.all
    #expect(changes.count == 2)
    #expect(changes.last?.results.map(\.id) == ["p0"])
  }
}
