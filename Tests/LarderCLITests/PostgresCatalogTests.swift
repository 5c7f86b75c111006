import Foundation
import Larder
import LarderTestSupport
import Testing

/// What only a shared PostgreSQL catalog offers: writers and a collector in separate processes
/// serialised by its advisory write lock, and moving a store's SQLite catalog across. Runs in
/// `make test`'s PostgreSQL pass (`LARDER_TEST_CATALOG`).
@Suite(.enabled(if: TestCatalog.isPostgres, "needs LARDER_TEST_CATALOG (make test's PostgreSQL pass)"))
struct PostgresCatalogTests {
  static var server: String { ProcessInfo.processInfo.environment["LARDER_TEST_CATALOG"] ?? "" }

  /// A schema of the test server no other test uses.
  static func freshCatalog() -> String {
    server + (server.contains("?") ? "&" : "?") + "schema=c_" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
  }

  /// Three writer processes keep re-uploading three contents (and removing their previous
  /// object, so each content keeps losing its last reference) while a collector process runs
  /// `gc --grace 0s` over and over: the dedupe decision and the delete of the same blob race
  /// across processes on every round. No referenced blob may be lost.
  @Test func writersAndACollectorInSeparateProcessesLoseNoReferencedBlob() throws {
    let box = try Sandbox()
    let binary = try CLI.binary()
    let contents = (0..<3).map { pseudoRandomBytes(3_000 + $0 * 100, seed: 900 + UInt64($0)) }
    for (i, bytes) in contents.enumerated() { try box.write("c\(i)", bytes) }
    let larder = try TestStore.open(at: box.data)  // the catalog exists before the race starts
    let rounds = 20
    let stop = box.path("stop")
    var writers: [pid_t] = []
    for k in 0..<3 {
      let script = """
        for i in $(seq 0 \(rounds - 1)); do
          "$BIN" put --data "$DATA" "$SRC/c$(( (i + \(k)) % 3 ))" "bkt/w\(k)-$i" >/dev/null || exit 10
          if [ $i -gt 0 ]; then "$BIN" rm --data "$DATA" "bkt/w\(k)-$((i - 1))" >/dev/null || exit 11; fi
        done
        """
      writers.append(
        try CLI.spawn(
          "/bin/bash", ["-c", script], environment: box.storeEnvironment.merging(["BIN": binary, "DATA": box.dataPath, "SRC": box.root.path]) { $1 },
          stdoutPath: box.path("w\(k).out"), stderrPath: box.path("w\(k).err")))
    }
    let collector = try CLI.spawn(
      "/bin/bash",
      ["-c", "n=0; while [ ! -e \"$STOP\" ]; do \"$BIN\" gc --grace 0s --data \"$DATA\" >/dev/null || exit 12; n=$((n+1)); done; echo $n"],
      environment: box.storeEnvironment.merging(["BIN": binary, "DATA": box.dataPath, "STOP": stop]) { $1 },
      stdoutPath: box.path("gc.out"), stderrPath: box.path("gc.err"))
    for (k, pid) in writers.enumerated() {
      #expect(try CLI.wait(pid, timeout: 300) == 0, "writer \(k): \(String(decoding: box.read("w\(k).err") ?? [], as: UTF8.self))")
    }
    try box.write("stop", [])
    #expect(try CLI.wait(collector, timeout: 120) == 0, "\(String(decoding: box.read("gc.err") ?? [], as: UTF8.self))")
    let collections = Int(String(decoding: box.read("gc.out") ?? [], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    #expect(collections >= 2, "the collector ran \(collections) times")

    // Each writer's last object is there with its bytes; nothing else is.
    #expect(try Sandbox.count(larder, "objects") == 3)
    for k in 0..<3 {
      let object = try larder.objects.get(bucket: "bkt", name: "w\(k)-\(rounds - 1)")
      #expect(try larder.files.data(of: object.file) == Data(contents[(rounds - 1 + k) % 3]))
    }
    // One more collection leaves exactly the referenced blobs, rows and files alike.
    #expect(try box.larder("gc", "--grace", "0s").status == 0)
    #expect(try Sandbox.count(larder, "files") == 3)
    #expect(try Sandbox.blobRows(larder) == box.blobFileNames)
    let verify = try box.larder("verify")
    #expect(verify.status == 0, "\(verify)")
  }

  /// `catalog copy` moves an SQLite catalog into an empty PostgreSQL schema with every row and
  /// the page-token key, checks the counts, and refuses a destination that holds a store.
  @Test func catalogCopyMovesEveryRowAndRefusesAStoreThatIsNotEmpty() throws {
    let box = try Sandbox()
    let source = try TestStore.open(at: box.data, configuration: .init(catalog: .dataDirectory))
    for i in 0..<5 { _ = try source.objects.put(bucket: "bkt", name: "n\(i)", data: Data("same".utf8)) }
    _ = try source.objects.put(bucket: "bkt", name: "other", data: Data("other".utf8))
    try source.write { tx in
      try tx.save(CopiedOwner(id: "o1"))
      try tx.save(CopiedItem(id: "i1", ownerID: "o1"))
    }
    let page = try source.objects.list(bucket: "bkt", maxResults: 2)
    let sub = try source.events.subscribe(url: "http://127.0.0.1:9/", bucket: "bkt")
    let destination = Self.freshCatalog()

    let copy = try CLI.larder(["catalog", "copy", "--from", box.dataPath, "--to", destination])
    #expect(copy.status == 0, "\(copy)")
    // One line per table, every table named in full (the longest, service_account_keys, too).
    var copied: [String: Int] = [:]
    for line in copy.stdout.split(separator: "\n").dropLast() {
      let fields = line.split(separator: " ")
      copied[String(fields[0])] = fields.count == 2 ? Int(fields[1]) : nil
    }
    #expect(copied["blobs"] == 2 && copied["files"] == 6 && copied["objects"] == 6, "\(copy.stdout)")
    #expect(copied["records"] == 2 && copied["model_references"] == 1, "\(copy.stdout)")
    #expect(copied["service_account_keys"] == 0 && copied["derived_files"] == 0, "\(copy.stdout)")
    #expect(copy.stdout.hasSuffix("counts match\n"))

    let moved = try TestStore.open(at: box.data, configuration: .init(catalog: CatalogLocation(parsing: destination)))
    #expect(try moved.objects.list(bucket: "bkt").items.map(\.name) == ["n0", "n1", "n2", "n3", "n4", "other"])
    #expect(try moved.files.data(of: moved.objects.get(bucket: "bkt", name: "n3").file) == Data("same".utf8))
    // The key moved with the rows: a page token from before the move still works.
    let next = try moved.objects.list(bucket: "bkt", maxResults: 2, pageToken: page.nextPageToken)
    #expect(next.items.map(\.name) == ["n2", "n3"])
    // References moved with their rules: the owner's delete cascades on the new catalog.
    #expect(try moved.models.delete(CopiedOwner.self, id: "o1"))
    #expect(try moved.models.find(CopiedItem.self, id: "i1") == nil)
    let listed = try box.larder("ls", "bkt", "--catalog", destination)
    #expect(listed.status == 0)
    #expect(listed.stdout.split(separator: "\n").count == 6)

    let again = try CLI.larder(["catalog", "copy", "--from", box.dataPath, "--to", destination])
    #expect(again.status == 1)
    #expect(again.stderr.contains("the destination catalog is not empty (blobs has rows)"), "\(again)")
    #expect(try moved.objects.list(bucket: "bkt").items.count == 6)

    let migrate = try CLI.larder(["catalog", "migrate", "--data", box.dataPath, "--catalog", destination])
    #expect(migrate.status == 0)
    #expect(migrate.stdout.hasSuffix("schema version \(Larder.catalogSchemaVersion)\n"), "\(migrate)")
    // The subscription moved without the outbox: it starts at the new catalog's end.
    _ = try moved.objects.put(bucket: "bkt", name: "after-move", data: Data("x".utf8))
    try TestStore.settle(moved)
    let batch = try EventDeliveryQueue(events: moved.events).claim(subscription: sub.id, owner: "a", lease: .seconds(30), limit: 10)
    #expect(batch.deliveries.map(\.event.object.name) == ["after-move"])
  }
}

private struct CopiedOwner: Model {
  var id: String
}

private struct CopiedItem: Model {
  var id: String
  var ownerID: String
  static let references = [ModelReference("ownerID", to: CopiedOwner.self, onDelete: .cascade)]
}
