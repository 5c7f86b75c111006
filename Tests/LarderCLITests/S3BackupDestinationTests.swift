import Foundation
import Larder
import LarderS3
import LarderTestSupport
import Testing

/// `larder backup`, `backup list|verify|prune` and `restore` with DEST in a bucket of the
/// loopback S3 engine (OpenStack Swift's S3 API), from whatever store this pass opens (SQLite
/// and files; PostgreSQL; PostgreSQL and S3). Every test has a key prefix of its own, nested.
@Suite(.enabled(if: LoopbackS3.isAvailable, "needs the loopback S3 engine"))
struct S3BackupDestinationTests {
  struct Destination {
    let url: String
    let prefix: String
    let environment: [String: String]
    let client: S3Client

    init() throws {
      let engine = try LoopbackS3.engine()
      prefix = "bk\(String(UInt64.random(in: 0...UInt64.max), radix: 16))/larder"
      url = engine.url + "&prefix=\(prefix)"
      environment = ["AWS_ACCESS_KEY_ID": engine.accessKeyID, "AWS_SECRET_ACCESS_KEY": engine.secretAccessKey]
      client = S3Client(
        configuration: try S3Configuration(url: engine.url),
        credentials: S3Credentials(accessKeyID: engine.accessKeyID, secretAccessKey: engine.secretAccessKey))
    }

    /// Keys under the destination, without its prefix, sorted.
    func keys(_ under: String = "") throws -> [String] {
      var keys: [String] = []
      try client.list(prefix: "\(prefix)/\(under)") { keys.append(String($0.key.dropFirst(prefix.count + 1))) }
      return keys.sorted()
    }

    func blobKeys() throws -> [String] {
      try keys("blobs/").map { String($0.split(separator: "/").last!) }
    }

    func larder(_ arguments: String...) throws -> RunResult {
      try CLI.larder(arguments, environment: environment)
    }

    func manifests() throws -> [[String: Any]] {
      try larder("backup", "list", url, "--json").json() as? [[String: Any]] ?? []
    }
  }

  @Test func backupListVerifyPruneAndRestoreWorkAgainstABucket() throws {
    let dest = try Destination()
    let box = try Sandbox()
    let objects = try BackupCommandTests.seed(box, count: 6)
    let first = try box.larder("backup", dest.url, environment: dest.environment)
    #expect(first.status == 0, "\(first)")
    #expect(first.stdout.contains("6 objects, 6 blobs ("), "\(first)")
    #expect(first.stdout.contains("; copied 6 blobs ("), "\(first)")
    let larder = try TestStore.open(at: box.data)
    #expect(try dest.blobKeys() == Sandbox.blobRows(larder))
    let firstID = try #require(try dest.manifests().first?["id"] as? String)
    #expect(
      try dest.keys().filter { !$0.hasPrefix("blobs/") }
        == ["snapshots/\(firstID)/catalog.sqlite", "snapshots/\(firstID)/manifest.json", "store-id"])
    #expect(try Sandbox.count(larder, "snapshot_pins") == 0)

    // Only what is new is copied.
    _ = try larder.objects.put(bucket: "b", name: "new", data: Data("new content".utf8))
    let second = try box.larder("backup", dest.url, environment: dest.environment)
    #expect(second.status == 0, "\(second)")
    #expect(second.stdout.contains("7 objects, 7 blobs ("), "\(second)")
    #expect(second.stdout.contains("; copied 1 blobs (11 B)"), "\(second)")
    #expect(try dest.manifests().count == 2)
    let deep = try dest.larder("backup", "verify", dest.url, "--deep")
    #expect(deep.status == 0, "\(deep)")
    #expect(deep.stdout == "checked 2 snapshots deeply: 0 damaged\n")

    let restored = try Sandbox()
    let restore = try restored.larder("restore", dest.url, environment: dest.environment)
    #expect(restore.status == 0, "\(restore)")
    #expect(restore.stdout.contains(": 7 objects, 7 blobs ("), "\(restore)")
    for (name, bytes) in objects.merging(["new": Array("new content".utf8)], uniquingKeysWith: { $1 }) {
      let get = try restored.larder("get", "b/\(name)", "--output", restored.path("got"))
      #expect(get.status == 0, "\(name): \(get)")
      #expect(restored.read("got") == bytes, "\(name)")
    }
    #expect(
      try restored.larder("stat", "b/o4", "--json").jsonObject()["metadata"] as? [String: String]
        == ["n": "4", "k": "v 4"])
    #expect(try restored.larder("verify").status == 0)

    // Prune: the first snapshot goes, and the blob only it referenced.
    try larder.objects.delete(bucket: "b", name: "o0")
    #expect(try box.larder("gc", "--grace", "0s").status == 0)
    let third = try box.larder("backup", dest.url, environment: dest.environment)
    #expect(third.stdout.contains("; copied 0 blobs (0 B)"), "\(third)")
    // Keeping two: the first snapshot goes; o0's blob stays (the second references it).
    let prune = try dest.larder("backup", "prune", dest.url, "--keep", "2")
    #expect(prune.status == 0, "\(prune)")
    #expect(prune.stdout == "removed 1 snapshots and 0 blobs (0 B)\n", "\(prune)")
    #expect(try dest.blobKeys().count == 7)
    #expect(try dest.manifests().count == 2)
    #expect(try !dest.keys().contains { $0.hasPrefix("snapshots/\(firstID)/") })
    let last = try dest.larder("backup", "prune", dest.url, "--keep", "1")
    #expect(last.stdout.hasPrefix("removed 1 snapshots and 1 blobs ("), "\(last)")
    #expect(try dest.blobKeys() == Sandbox.blobRows(larder))
    #expect(try dest.larder("backup", "verify", dest.url, "--deep").status == 0)
    #expect(try !dest.keys().contains("backup.lock"))
  }

  @Test func killedBackupIsNeverListedAndTheRerunCopiesOnlyWhatWasMissing() throws {
    let dest = try Destination()
    let box = try Sandbox()
    _ = try BackupCommandTests.seed(box, count: 40)
    let crashed = try box.larder(
      "backup", dest.url, environment: dest.environment.merging(["LARDER_CRASH_AT": "backup-mid-copy"]) { $1 })
    #expect(crashed.status == CrashTests.crashStatus, "\(crashed)")
    #expect(try dest.blobKeys().count == 20)
    let leftover = try dest.keys("snapshots/")
    #expect(leftover.count == 1 && leftover.first?.hasSuffix("/catalog.sqlite") == true, "\(leftover)")
    #expect(try dest.larder("backup", "list", dest.url).stdout == "")
    #expect(try dest.larder("backup", "verify", dest.url).stderr.contains("no complete snapshot"))

    // The lease object the killed process left is not in the way on this host.
    #expect(try dest.keys().contains("backup.lock"))
    let second = try box.larder("backup", dest.url, environment: dest.environment)
    #expect(second.status == 0, "\(second)")
    let manifests = try dest.manifests()
    #expect(manifests.count == 1)
    #expect(manifests.first?["blobs"] as? Int == 40)
    #expect(manifests.first?["copiedBlobs"] as? Int == 20)
    let id = manifests.first?["id"] as? String ?? "?"
    #expect(try dest.keys("snapshots/") == ["snapshots/\(id)/catalog.sqlite", "snapshots/\(id)/manifest.json"])
    #expect(try dest.blobKeys().count == 40)
    #expect(try !dest.keys().contains("backup.lock"))
  }

  @Test func deepVerifyNamesABlobCorruptedInTheBucketAndRestoreRefusesIt() throws {
    let dest = try Destination()
    let box = try Sandbox()
    let objects = try BackupCommandTests.seed(box, count: 4)
    #expect(try box.larder("backup", dest.url, environment: dest.environment).status == 0)
    let sha = try CLI.opensslSHA256(box.write("o2", objects["o2"]!))
    var bytes = objects["o2"]!
    bytes[100] ^= 0xFF
    try dest.client.put(.bytes(bytes), key: "\(dest.prefix)/blobs/sha256/\(sha.prefix(2))/\(sha.dropFirst(2).prefix(2))/\(sha)")
    let id = try dest.manifests().first?["id"] as? String ?? "?"

    #expect(try dest.larder("backup", "verify", dest.url).status == 0)
    let deep = try dest.larder("backup", "verify", dest.url, "--deep")
    #expect(deep.status == 1)
    let lines = deep.stdout.split(separator: "\n").map(String.init)
    #expect(lines.count == 2, "\(deep)")
    #expect(lines.first?.hasPrefix("\(id)  \(sha)  its bytes hash to ") == true, "\(deep)")
    #expect(lines.first?.hasSuffix("blobs/sha256/\(sha.prefix(2))/\(sha.dropFirst(2).prefix(2))/\(sha))  (b/o2)") == true, "\(deep)")
    #expect(lines.last == "checked 1 snapshots deeply: 1 damaged")

    let target = try Sandbox()
    let restore = try target.larder("restore", dest.url, environment: dest.environment)
    #expect(restore.status == 1)
    #expect(restore.stderr.contains("read back as"), "\(restore)")
    #expect(!FileManager.default.fileExists(atPath: target.data.appendingPathComponent("larder.sqlite").path))
  }

  /// An endpoint nobody answers, credentials the store refuses, a bucket it does not have: each
  /// a clear error before anything is written, in the destination or the store.
  @Test func unreachableRefusedOrMissingBucketIsAClearErrorAndWritesNothing() throws {
    let dest = try Destination()
    let box = try Sandbox()
    _ = try BackupCommandTests.seed(box, count: 2)
    let engine = try LoopbackS3.engine()
    let query = "region=us-east-1&path-style=1&prefix=\(dest.prefix)"
    let endpoint = try #require(URLComponents(string: engine.url)?.queryItems?.first { $0.name == "endpoint" }?.value)
    let cases: [(url: String, environment: [String: String], says: String)] = [
      ("s3://larder-test?endpoint=http://127.0.0.1:9&\(query)", dest.environment, "endpoint unreachable"),
      (dest.url, dest.environment.merging(["AWS_SECRET_ACCESS_KEY": "wrong"]) { $1 }, "HTTP 403"),
      ("s3://no-such-bucket-here?endpoint=\(endpoint)&\(query)", dest.environment, "HTTP 404 NoSuchBucket"),
    ]
    for (url, environment, says) in cases {
      let shown = try #require(URLComponents(string: url)).queryItems!.first { $0.name == "endpoint" }!.value!
      for arguments in [["backup", url], ["backup", "list", url], ["backup", "verify", url], ["restore", url]] {
        let target = arguments.first == "restore" ? try Sandbox() : box
        let result =
          arguments.count == 2
          ? try target.larder(args: arguments, environment: environment)
          : try CLI.larder(arguments, environment: environment)
        #expect(result.status == 1, "\(arguments): \(result)")
        // The last line (in the S3 pass the wrong secret is the source store's too: it warns first).
        let said = result.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(
          said.hasPrefix(
            "larder: error: cannot use the backup destination s3://\(URLComponents(string: url)!.host!)?endpoint=\(shown)&region=us-east-1&path-style=1&prefix=\(dest.prefix): S3 ListObjectsV2"),
          "\(arguments): \(result)")
        #expect(said.contains(says), "\(arguments): \(result)")
        if arguments.first == "restore" {
          #expect((try? FileManager.default.contentsOfDirectory(atPath: target.dataPath)) ?? [] == [])
        }
      }
    }
    #expect(try dest.keys() == [])
    #expect(try Sandbox.count(TestStore.open(at: box.data), "snapshot_pins") == 0)
    #expect(try box.larder("verify").status == 0)
  }
}
