import Foundation
import Larder
import LarderTestSupport
import Testing

/// Two `larder serve` processes on one PostgreSQL catalog (and one data directory, or one S3
/// prefix in the S3 pass), each with a pool of writer connections whose keyed writes commit
/// together, while `larder gc --grace 0s` runs over and over: the drill of ``ClusterDrill``
/// (four contents uploaded under ever new names, downloaded through the other node, half of
/// them deleted again). No upload may
/// fail, every acknowledged object must download exactly, and `larder verify` must be clean.
@Suite(.enabled(if: TestCatalog.isPostgres, "needs LARDER_TEST_CATALOG (make test's PostgreSQL pass)"))
struct KeyedWriteNodeTests {
  @Test func twoNodesWithWriterPoolsLoseNothingWhileGCRuns() throws {
    let box = try Sandbox()
    _ = try TestStore.open(at: box.data)  // the schema exists before both nodes start
    var nodes = try (0..<2).map { _ in
      try ServedLarder(box, arguments: ["--threads", "8", "--catalog-writers", "8"])
    }
    defer { for i in nodes.indices { nodes[i].kill() } }
    // Every upload one of four shared contents, every other object deleted again: contents keep
    // losing their last reference, being collected and being uploaded anew by several clients
    // at once, so new-content commits of one digest race each other and the collector.
    var drill = ClusterDrill(
      nodes: nodes, gcArguments: ["gc", "--grace", "0s", "--data", box.dataPath], environment: [:],
      workers: 8, seconds: 8)
    drill.sharedEvery = 1
    drill.deleteEvery = 2
    let outcome = try drill.run()
    let verify = try box.larder("verify")
    print("keyed writes, two nodes: \(outcome.summary)")
    #expect(outcome.errors == [])
    #expect(outcome.gcFailures == [])
    #expect(outcome.lost == 0)
    #expect(outcome.uploads > 30)
    #expect(outcome.gcRuns >= 2)
    #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
  }
}
