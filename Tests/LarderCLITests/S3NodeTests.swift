import Foundation
import Larder
@testable import LarderS3Store
import LarderTestSupport
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
    try ClusterDrill.upload(node, name, bytes)
  }

  static func download(_ node: ServedLarder, _ name: String, range: String? = nil) throws -> RawResponse {
    try ClusterDrill.download(node, name, range: range)
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
    // Modest for CI; LARDER_MULTINODE_CLIENTS=200 LARDER_MULTINODE_SECONDS=30 for the full drill.
    let environmentSettings = ProcessInfo.processInfo.environment
    let drill = ClusterDrill(
      nodes: cluster.nodes, gcArguments: ["gc", "--grace", "0s", "--data", cluster.boxes[0].dataPath] + cluster.store,
      environment: cluster.environment,
      workers: environmentSettings["LARDER_MULTINODE_CLIENTS"].flatMap { Int($0) } ?? 12,
      seconds: environmentSettings["LARDER_MULTINODE_SECONDS"].flatMap { Double($0) } ?? 8)
    let outcome = try drill.run()
    let verify = try cluster.larder(["verify", "--deep"])
    print("multi-node: \(outcome.summary)")
    #expect(outcome.errors == [])
    #expect(outcome.gcFailures == [])
    #expect(outcome.lost == 0)
    #expect(outcome.uploads > 30)
    #expect(outcome.gcRuns >= 2)
    #expect(verify.status == 0, "\(verify.stdout)")
  }
}

/// What clients see when the S3 store cannot be reached: 503 with the API's JSON error and a
/// retry hint, for uploads and downloads alike, and nothing acknowledged. Two `larder serve`
/// processes share one data directory (SQLite) and bucket prefix; the second one's endpoint is
/// a port where nothing listens.
@Suite(.enabled(if: LoopbackS3.isAvailable, "needs the loopback S3 engine"))
struct S3FailureAnswerTests {
  @Test func anUnreachableBlobStoreAnswers503WithRetryAfterAndAcknowledgesNothing() throws {
    let engine = try LoopbackS3.engine()
    let box = try Sandbox()
    let prefix = "fa" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    let environment = ["AWS_ACCESS_KEY_ID": engine.accessKeyID, "AWS_SECRET_ACCESS_KEY": engine.secretAccessKey]
    var live = try ServedLarder(box, environment: environment, arguments: ["--blobs", engine.url + "&prefix=\(prefix)"])
    defer { live.kill() }
    let big = pseudoRandomBytes(100_000, seed: 3)
    let small = Array("small".utf8)
    #expect(try MultiNodeTests.upload(live, "big.bin", big).status == 200)
    #expect(try MultiNodeTests.upload(live, "small.txt", small).status == 200)
    // Port 9 on loopback: the connection is refused at once.
    var cut = try ServedLarder(
      box, environment: environment,
      arguments: ["--blobs", "s3://\(LoopbackS3.bucket)?endpoint=http://127.0.0.1:9&path-style=1&prefix=\(prefix)"])
    defer { cut.kill() }
    let answers = [
      try MultiNodeTests.download(cut, "big.bin"), try MultiNodeTests.download(cut, "small.txt"),
      try MultiNodeTests.upload(cut, "new.bin", pseudoRandomBytes(50_000, seed: 4)),
    ]
    for answer in answers {
      #expect(answer.status == 503)
      #expect(answer.headers["retry-after"] == "1")
      #expect(answer.headers["content-type"] == "application/json; charset=utf-8")
      let error = try #require(
        (try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["error"] as? [String: Any])
      #expect(error["code"] as? Int == 503)
      #expect(error["status"] as? String == "UNAVAILABLE")
      #expect(error["message"] as? String == "the blob store is unavailable; retry")
    }
    // A HEAD needs no bytes: answered from the catalog.
    #expect(try cut.exchange("HEAD", "/v0/b/app/o/big.bin?alt=media").status == 200)
    // Nothing was acknowledged: the refused upload does not exist; the rest is intact.
    #expect(try MultiNodeTests.download(live, "new.bin").status == 404)
    #expect(try MultiNodeTests.download(live, "big.bin").body == big)
    #expect(try MultiNodeTests.download(live, "small.txt").body == small)
  }
}

/// Downloads from S3 stream to the client in bounded memory: a node's peak resident memory
/// grows by far less than the object while it serves one to a client that reads slowly.
@Suite(.enabled(if: LoopbackS3.isAvailable, "needs the loopback S3 engine"))
struct S3StreamingDownloadTests {
  /// Peak resident memory of `pid` (`VmHWM`), in bytes.
  static func peakResident(_ pid: pid_t) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") })
    return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
  }

  @Test func aLargeDownloadToASlowClientKeepsTheNodesMemoryFlat() throws {
    let engine = try LoopbackS3.engine()
    let box = try Sandbox()
    let blobs = ["--blobs", engine.url + "&prefix=sd" + String(UInt64.random(in: 0...UInt64.max), radix: 16)]
    let environment = ["AWS_ACCESS_KEY_ID": engine.accessKeyID, "AWS_SECRET_ACCESS_KEY": engine.secretAccessKey]
    var uploader = try ServedLarder(box, environment: environment, arguments: blobs)
    defer { uploader.kill() }
    let size = 48 << 20
    let bytes = pseudoRandomBytes(size, seed: 11)
    #expect(try MultiNodeTests.upload(uploader, "large.bin", bytes).status == 200)
    var server = try ServedLarder(box, environment: environment, arguments: blobs)
    defer { server.kill() }
    // Warm up (threads, libcurl, the catalog) with a small streamed download.
    #expect(try MultiNodeTests.download(server, "large.bin", range: "bytes=0-99999").status == 206)
    let before = try Self.peakResident(server.pid)
    let connection = try RawConnection(port: server.port)
    defer { connection.close() }
    try connection.send(
      Array("GET /v0/b/app/o/large.bin?alt=media HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
    // A slow reader: 64 KiB at a time, pausing, so the node is ahead of its client throughout.
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    var reads = 0
    while true {
      let n = buffer.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, $0.count, 0) }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { break }
      received += buffer[0..<n]
      reads += 1
      if reads % 64 == 0 { usleep(20_000) }
    }
    let separator = Array("\r\n\r\n".utf8)
    let end = try #require(received.indices.first { received[$0...].starts(with: separator) })
    let head = String(decoding: received[..<end], as: UTF8.self)
    #expect(head.hasPrefix("HTTP/1.1 200"))
    #expect(head.lowercased().contains("content-length: \(size)"))
    #expect(Array(received[(end + 4)...]) == bytes)
    let growth = try Self.peakResident(server.pid) - before
    print("streaming download: \(size >> 20) MiB served, peak resident memory grew \(growth >> 10) KiB")
    #expect(growth < 8 << 20, "peak resident memory grew \(growth) bytes for a \(size)-byte download")
  }
}

/// The store commands with `--blobs s3://…`: credentials from the environment or a file, never
/// the command line; bad values are usage errors naming the option.
@Suite(.enabled(if: LoopbackS3.isAvailable, "needs the loopback S3 engine"))
struct S3CommandTests {
  @Test func putGetAndVerifyWorkOnABucketAndVerifyFindsAMissingObject() throws {
    let engine = try LoopbackS3.engine()
    let box = try Sandbox()
    let url = engine.url + "&prefix=cl" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    let credentials = try box.write(
      "s3.credentials",
      Array("aws_access_key_id = \(engine.accessKeyID)\naws_secret_access_key = \(engine.secretAccessKey)\n".utf8))
    let bytes = pseudoRandomBytes(300_000, seed: 5)
    let file = try box.write("in.bin", bytes)
    let store = ["--data", box.dataPath, "--blobs", url, "--s3-credentials", credentials]
    #expect(try CLI.larder(["put", file, "app/x.bin"] + store).status == 0)
    // The environment works as well as the file.
    let environment = ["AWS_ACCESS_KEY_ID": engine.accessKeyID, "AWS_SECRET_ACCESS_KEY": engine.secretAccessKey]
    let get = try CLI.larder(["get", "app/x.bin", "-o", box.path("out.bin"), "--data", box.dataPath, "--blobs", url], environment: environment)
    #expect(get.status == 0)
    #expect(box.read("out.bin") == bytes)
    // Nothing of the content is in the data directory.
    #expect(box.files(under: "blobs").isEmpty)
    let clean = try CLI.larder(["verify", "--deep"] + store)
    #expect(clean.status == 0)
    #expect(clean.stdout.contains("checked 1 blobs (293.0 KiB): 0 findings"), "\(clean.stdout)")
    // The object vanishes behind the store's back: verify says so, and --repair quarantines.
    let sha = try CLI.opensslSHA256(file)
    // (Its key carries the fence its upload took: the store's only object.)
    // (The bucket's own calls, as a content store over a catalog it does not consult for them.)
    let scratch = try Larder.temporary()
    let backend = try S3ContentStore(url: url, catalog: scratch.catalog, environment: environment)
    var stored: [BlobAddress] = []
    try backend.forEachStoredBlob(dated: { address, _, _ in stored.append(address) })
    #expect(stored.map(\.hex) == [sha])
    for address in stored { try backend.remove(address) }
    let dirty = try CLI.larder(["verify"] + store)
    #expect(dirty.status == 1)
    #expect(dirty.stdout.contains("missing-blob-file  \(sha)  the blob's object is missing"), "\(dirty.stdout)")
    // Repaired (its file marked quarantined): clean, and the download says why it cannot answer.
    #expect(try CLI.larder(["verify", "--repair"] + store).status == 0)
    let repaired = try CLI.larder(["verify"] + store)
    #expect(repaired.status == 0, "\(repaired.stdout)")
    #expect(repaired.stdout.contains("1 quarantined"), "\(repaired.stdout)")
    let quarantined = try CLI.larder(["get", "app/x.bin", "-o", box.path("again.bin")] + store)
    #expect(quarantined.status == 1)
    #expect(quarantined.stderr.contains("is damaged: it failed verification and was quarantined"), "\(quarantined.stderr)")
    // Uploading the same content again heals it.
    #expect(try CLI.larder(["put", file, "app/y.bin"] + store).status == 0)
    #expect(try CLI.larder(["get", "app/x.bin", "-o", box.path("healed.bin")] + store).status == 0)
    #expect(box.read("healed.bin") == bytes)
    #expect(try CLI.larder(["verify", "--deep"] + store).stdout.contains("0 findings, 0 unrepaired, 0 quarantined"))
  }

  @Test func badBlobSettingsAreRefusedBeforeAnythingHappens() throws {
    let box = try Sandbox()
    let file = try box.write("in.bin", [1, 2, 3])
    let scheme = try CLI.larder(["put", file, "app/x", "--data", box.dataPath, "--blobs", "ftp://bucket"])
    #expect(scheme.status == 2)
    #expect(scheme.stderrLines.first == "larder: error: --blobs: blobs are an s3:// URL or 'filesystem', not 'ftp://bucket'")
    // No --blobs at all: not even the bucket the harness hands `larder` for this data directory.
    let lone = try CLI.larder(
      ["get", "app/x", "--data", box.dataPath, "--s3-credentials", box.path("none")], environment: ["LARDER_BLOBS": ""])
    #expect(lone.status == 2)
    #expect(lone.stderrLines.first == "larder: error: --s3-credentials needs --blobs s3://…")
    let noCredentials = try CLI.larder(
      ["put", file, "app/x", "--data", box.dataPath, "--blobs", "s3://larder-test?endpoint=http://127.0.0.1:9&path-style=1"],
      environment: ["AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""])
    #expect(noCredentials.status == 1)
    #expect(noCredentials.stderr.contains("S3 credentials missing"), "\(noCredentials.stderr)")
    #expect(box.files(under: "blobs").isEmpty)
  }
}
