import Foundation
import Larder
import LarderCrypto
import LarderServer
import LarderTestSupport
import Synchronization
import Testing

/// What one request costs the catalog and the policy, counted through wrappers the store and
/// the service are built with: every object operation reads its row once and asks the policy
/// once (``ObjectService``), and the last chunk of a large GCS upload reads none of its bytes
/// back for the checksums it answers.
@Suite struct RequestCostTests {
  /// Every catalog statement, in order.
  final class StatementLog: CatalogObserver {
    private let seen = Mutex<[String]>([])
    func statement(_ sql: String) { seen.withLock { $0.append(sql) } }
    func take() -> [String] {
      seen.withLock { log in
        defer { log = [] }
        return log
      }
    }
  }

  /// The operations the policy was asked about, in order; answers as `rules` does.
  final class QuestionLog: AccessPolicy {
    let rules: any AccessPolicy
    private let asked = Mutex<[AccessOperation]>([])
    init(_ rules: any AccessPolicy) { self.rules = rules }
    func decide(_ request: AccessRequest) -> AccessDecision {
      asked.withLock { $0.append(request.operation) }
      return rules.decide(request)
    }
    var readsMD5Hash: Bool { rules.readsMD5Hash }
    var allowsOnlyOnKnownFields: Bool { rules.allowsOnlyOnKnownFields }
    func take() -> [AccessOperation] {
      asked.withLock { log in
        defer { log = [] }
        return log
      }
    }
  }

  /// A service whose store and policy report to `statements` and `questions`; the rules read
  /// the size, which the early question knows from `Content-Length`.
  static func withCountedService(
    _ body: (InProcessService, StatementLog, QuestionLog) throws -> Void
  ) throws {
    let rulesFile = FileManager.default.temporaryDirectory.appendingPathComponent(
      "cost-\(UUID().uuidString).rules")
    try """
    rules_version = '2';
    service firebase.storage {
      match /b/{bucket}/o {
        match /{path=**} {
          allow read: if true;
          allow write: if request.resource.size < 100 * 1024 * 1024;
        }
      }
    }
    """.write(to: rulesFile, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(at: rulesFile) }
    let statements = StatementLog()
    let questions = QuestionLog(try RulesPolicy(file: rulesFile))
    let s = try InProcessService(
      policy: .custom(questions),
      store: { directory in
        // No background hashing: every checksum a request answers is its own work.
        try TestStore.open(
          at: directory, configuration: .init(faults: .none, backgroundMD5: false, catalogObserver: statements))
      })
    defer { s.close() }
    _ = statements.take()
    try body(s, statements, questions)
  }

  /// The statements that read an object's row.
  static func rowReads(_ log: [String]) -> Int {
    log.filter {
      $0.contains("FROM objects o JOIN files f ON f.id = o.file_id WHERE o.bucket = ? AND o.name = ?")
    }.count
  }

  /// The statements that record checksums computed by reading a blob back.
  static func readBacks(_ log: [String]) -> Int {
    log.filter { $0.hasPrefix("UPDATE blobs SET md5 = coalesce(md5, ?), crc32c") }.count
  }

  @Test func aFirebaseSimpleUploadReadsItsRowOnceAndAsksTheWriteOnce() throws {
    try Self.withCountedService { s, statements, questions in
      for round in 0..<2 {
        // A create, then an update of the row the first made.
        let r = try s.send(.init("POST", "/v0/b/bkt/o?name=cost%2Fa.txt", body: Array("round \(round)".utf8)))
        #expect(r.status == 200, "\(r.text)")
        let log = statements.take()
        #expect(Self.rowReads(log) == 1, "\(log)")
        // One write question; the answer's download tokens ask `get` of the object written.
        #expect(questions.take() == [round == 0 ? .create : .update, .get])
      }
    }
  }

  @Test func aGetAsksOnceAndReadsItsRowAtMostOnce() throws {
    try Self.withCountedService { s, statements, questions in
      #expect(try s.send(.init("POST", "/v0/b/bkt/o?name=g.txt", body: Array("hello".utf8))).status == 200)
      _ = (statements.take(), questions.take())
      for target in [
        "/v0/b/bkt/o/g.txt", "/v0/b/bkt/o/g.txt?alt=media", "/storage/v1/b/bkt/o/g.txt?alt=media",
      ] {
        let r = try s.send(.get(target))
        #expect(r.status == 200, "\(target): \(r.text)")
        #expect(Self.rowReads(statements.take()) <= 1, "\(target)")
        #expect(questions.take() == [.get], "\(target)")
      }
    }
  }

  @Test func aGcsMediaUploadReadsItsRowOnceAndAsksOnce() throws {
    try Self.withCountedService { s, statements, questions in
      let content = testBytes(100_000, seed: 5)
      let r = try s.send(
        .init(
          "POST", "/upload/storage/v1/b/bkt/o?uploadType=media&name=m.bin&ifGenerationMatch=0", body: content)
      )
      #expect(r.status == 200, "\(r.text)")
      #expect(
        r.json?["crc32c"] as? String == Data(CRC32C.bytes(CRC32C.checksum(content))).base64EncodedString())
      let log = statements.take()
      #expect(Self.rowReads(log) == 1, "\(log)")
      #expect(Self.readBacks(log) == 0, "\(log)")
      #expect(questions.take() == [.create])
    }
  }

  @Test func theLastChunkOfA64MiBGcsUploadReadsNoByteBack() throws {
    try Self.withCountedService { s, statements, questions in
      let content = testBytes(64 << 20, seed: 9)
      let start = try s.send(
        .init(
          "POST", "/upload/storage/v1/b/bkt/o?uploadType=resumable",
          headers: [
            ("Content-Type", "application/json"), ("X-Upload-Content-Length", String(content.count)),
          ],
          body: Array(#"{"name": "big/64.bin"}"#.utf8)))
      #expect(start.status == 200, "\(start.text)")
      let location = try #require(start["Location"])
      let session = String(location.dropFirst("http://127.0.0.1".count))
      let split = 56 << 20
      let first = try s.send(
        .init(
          "PUT", session, headers: [("Content-Range", "bytes 0-\(split - 1)/\(content.count)")],
          body: Array(content[..<split])))
      #expect(first.status == 308, "\(first.text)")
      _ = (statements.take(), questions.take())
      let last = try s.send(
        .init(
          "PUT", session,
          headers: [("Content-Range", "bytes \(split)-\(content.count - 1)/\(content.count)")],
          body: Array(content[split...])))
      #expect(last.status == 200, "\(last.text)")
      let log = statements.take()
      #expect(Self.readBacks(log) == 0, "\(log)")
      // The admission step, inside the write that publishes the upload.
      #expect(questions.take() == [.create])
      #expect(last.json?["size"] as? String == String(content.count))
      #expect(
        last.json?["crc32c"] as? String == Data(CRC32C.bytes(CRC32C.checksum(content))).base64EncodedString())
      #expect(last.json?["md5Hash"] as? String == Data(Digest.hash(.md5, content)).base64EncodedString())
    }
  }
}
