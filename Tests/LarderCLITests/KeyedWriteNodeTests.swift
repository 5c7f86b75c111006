import Foundation
import Larder
import LarderTestSupport
import Testing

/// Two `larder serve` processes on one PostgreSQL catalog (and one data directory, or one S3
/// prefix in the S3 pass), each with a pool of writer connections whose keyed writes commit
/// together, while `larder gc --grace 0s` runs over and over: the drill of ``ClusterDrill``
/// (overlapping contents uploaded, downloaded through the other node, deleted). No upload may
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
    let drill = ClusterDrill(
      nodes: nodes, gcArguments: ["gc", "--grace", "0s", "--data", box.dataPath], environment: [:],
      workers: 8, seconds: 8)
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
