import Foundation
import LarderTestSupport
import Synchronization
import Testing

/// Three `larder serve` processes on one PostgreSQL catalog and one S3 store (OpenStack Swift),
/// each with a data directory of its own (temp files only): any node answers for content any
/// other took, and `larder gc` runs against the same store while clients upload, download and
/// delete through all three. Needs both engines (`make test`'s S3 pass).
@Suite(
  .enabled(
    if: !(ProcessInfo.processInfo.environment["LARDER_TEST_CATALOG"] ?? "").isEmpty && LoopbackS3.isAvailable,
    "needs PostgreSQL (LARDER_TEST_CATALOG) and the loopback S3 engine"))
struct MultiNodeTests {
  struct Cluster {
    let boxes: [Sandbox]
    var nodes: [ServedLarder]
    /// `--catalog … --blobs …`, as every node and CLI command of this store takes them.
    let store: [String]
    let environment: [String: String]

    init(count: Int) throws {
      let engine = try LoopbackS3.engine()
      let server = ProcessInfo.processInfo.environment["LARDER_TEST_CATALOG"] ?? ""
      let id = String(UInt64.random(in: 0...UInt64.max), radix: 16)
      store = [
        "--catalog", server + (server.contains("?") ? "&" : "?") + "schema=mn_\(id)",
        "--blobs", engine.url + "&prefix=mn\(id)",
      ]
      environment = ["AWS_ACCESS_KEY_ID": engine.accessKeyID, "AWS_SECRET_ACCESS_KEY": engine.secretAccessKey]
      boxes = try (0..<count).map { _ in try Sandbox() }
      var nodes: [ServedLarder] = []
      for box in boxes {
        nodes.append(try ServedLarder(box, environment: environment, arguments: store))
      }
      self.nodes = nodes
    }

    mutating func stop() { for i in nodes.indices { nodes[i].kill() } }

    func larder(_ arguments: [String]) throws -> RunResult {
      try CLI.larder(arguments + ["--data", boxes[0].dataPath] + store, environment: environment)
    }
  }

  static func upload(_ node: ServedLarder, _ name: String, _ bytes: [UInt8]) throws -> RawResponse {
    try node.exchange("POST", "/v0/b/app/o?name=\(name)", headers: [("Content-Type", "application/octet-stream")], body: bytes)
  }

  static func download(_ node: ServedLarder, _ name: String, range: String? = nil) throws -> RawResponse {
    try node.exchange("GET", "/v0/b/app/o/\(name)?alt=media", headers: range.map { [("Range", $0)] } ?? [])
  }

  @Test func contentUploadedThroughOneNodeIsServedExactlyByTheOthers() throws {
    var cluster = try Cluster(count: 3)
    defer { cluster.stop() }
    let (a, b, c) = (cluster.nodes[0], cluster.nodes[1], cluster.nodes[2])
    // Larger than the inline limit and than S3's multipart threshold: streamed both ways.
    let big = pseudoRandomBytes(17 << 20 + 12_345, seed: 7)
    let small = Array("hello from node A".utf8)
    #expect(try Self.upload(a, "big.bin", big).status == 200)
    #expect(try Self.upload(a, "small.txt", small).status == 200)
    for node in [b, c] {
      let whole = try Self.download(node, "big.bin")
      #expect(whole.status == 200)
      #expect(whole.headers["content-length"] == String(big.count))
      #expect(whole.body == big)
      let part = try Self.download(node, "big.bin", range: "bytes=1000000-1999999")
      #expect(part.status == 206)
      #expect(part.headers["content-range"] == "bytes 1000000-1999999/\(big.count)")
      #expect(part.body == Array(big[1_000_000..<2_000_000]))
      let text = try Self.download(node, "small.txt")
      #expect(text.status == 200)
      #expect(text.body == small)
      // Conditional requests and maxSize answer as on one node.
      let etag = try #require(whole.headers["etag"])
      #expect(try node.exchange("GET", "/v0/b/app/o/big.bin?alt=media", headers: [("If-None-Match", etag)]).status == 304)
      let limited = try node.exchange("GET", "/v0/b/app/o/big.bin?alt=media&maxSize=1000")
      #expect(limited.status == 413)
    }
    #expect(try cluster.larder(["verify", "--deep"]).status == 0)
  }

  @Test func clientsOnEveryNodeLoseNothingWhileGCRuns() throws {
    var cluster = try Cluster(count: 3)
    defer { cluster.stop() }
    let nodes = cluster.nodes
    let workers = 12
    let seconds = 8.0
    // A few contents every worker uploads and deletes again: their rows and objects keep
    // becoming orphans the collector deletes while another upload of the same bytes dedupes.
    let shared = (0..<4).map { pseudoRandomBytes(20_000 + $0 * 7_000, seed: 1000 + UInt64($0)) }
    struct Tally {
      var uploads = 0
      var downloads = 0
      var deletes = 0
      var errors: [String] = []
      var kept: [(name: String, bytes: [UInt8])] = []
    }
    let tally = Mutex(Tally())
    let stop = Atomic<Bool>(false)
    let gcRuns = Atomic<Int>(0)
    let gcFailures = Mutex<[String]>([])
    let gcArguments = ["gc", "--grace", "0s", "--data", cluster.boxes[0].dataPath] + cluster.store
    let environment = cluster.environment
    let collector = Thread {
      while !stop.load(ordering: .relaxed) {
        do {
          let r = try CLI.larder(gcArguments, environment: environment)
          if r.status == 0 { gcRuns.add(1, ordering: .relaxed) } else { gcFailures.withLock { $0.append(r.stderr) } }
        } catch {
          gcFailures.withLock { $0.append("\(error)") }
        }
      }
    }
    collector.start()
    let deadline = Date().addingTimeInterval(seconds)
    DispatchQueue.concurrentPerform(iterations: workers) { w in
      var i = 0
      while Date() < deadline {
        i += 1
        let name = "w\(w)-\(i).bin"
        let bytes = i % 2 == 0 ? shared[(w + i) % shared.count] : pseudoRandomBytes(1 + (w * 7919 + i * 104_729) % 300_000, seed: UInt64(w * 100_000 + i))
        let up = nodes[(w + i) % 3]
        let down = nodes[(w + i + 1) % 3]
        do {
          let put = try Self.upload(up, name, bytes)
          guard put.status == 200 else { throw HarnessFailure("upload \(name): \(put.status) \(put.text)") }
          let get = try Self.download(down, name)
          guard get.status == 200, get.body == bytes else {
            throw HarnessFailure("download \(name): \(get.status), \(get.body.count) of \(bytes.count) bytes")
          }
          if i % 3 == 0 {
            let delete = try down.exchange("DELETE", "/v0/b/app/o/\(name)")
            guard delete.status == 204 || delete.status == 200 else { throw HarnessFailure("delete \(name): \(delete.status)") }
            tally.withLock { $0.deletes += 1 }
          } else {
            tally.withLock { $0.kept.append((name, bytes)) }
          }
          tally.withLock {
            $0.uploads += 1
            $0.downloads += 1
          }
        } catch {
          tally.withLock { $0.errors.append("\(error)") }
        }
      }
    }
    stop.store(true, ordering: .relaxed)
    while !collector.isFinished { usleep(50_000) }
    // One more collection with everything settled, then every acknowledged object, exactly.
    #expect(try cluster.larder(["gc", "--grace", "0s"]).status == 0)
    let result = tally.withLock { $0 }
    var lost = 0
    for (index, object) in result.kept.enumerated() {
      let get = try Self.download(nodes[index % 3], object.name)
      if get.status != 200 || get.body != object.bytes { lost += 1 }
    }
    let verify = try cluster.larder(["verify", "--deep"])
    print(
      "multi-node: \(result.uploads) uploads, \(result.downloads) downloads, \(result.deletes) deletes over 3 nodes in \(seconds) s, \(gcRuns.load(ordering: .relaxed)) gc runs, \(result.errors.count) errors, \(lost) of \(result.kept.count) kept objects lost"
    )
    #expect(result.errors == [])
    #expect(gcFailures.withLock { $0 } == [])
    #expect(lost == 0)
    #expect(result.uploads > 30)
    #expect(gcRuns.load(ordering: .relaxed) >= 2)
    #expect(verify.status == 0, "\(verify.stdout)")
  }
}
