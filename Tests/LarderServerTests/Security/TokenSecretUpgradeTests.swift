import Foundation
import Larder
import LarderAuth
import LarderServer
import LarderTestSupport
import Testing

/// The HS256 key moved from `DATA/secret` to the catalog's `token_secret` row: a store upgraded
/// from a Larder that kept the file adopts its key, so tokens issued before keep working.
@Suite struct TokenSecretUpgradeTests {
  static let upload = "/v0/b/app/o?name=users%2Falice%2Fa.txt"

  /// A fresh data directory, removed afterwards.
  func withDirectory(_ body: (URL) throws -> Void) throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-upgrade-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    try body(directory)
  }

  func post(_ service: LarderService, _ token: String) throws -> HTTPTestResponse {
    try HTTPTestDriver(service.app).execute(
      "POST", Self.upload,
      headers: [("Host", "127.0.0.1"), ("Authorization", "Bearer \(token)"), ("Content-Length", "1")], body: [0x41])
  }

  @Test func aTokenIssuedBeforeTheUpgradeVerifiesAfterIt() throws {
    try withDirectory { directory in
      // What an older server left: DATA/secret, and a token signed with it.
      let legacy = (0..<32).map { UInt8($0 * 3 + 11) }
      #expect(
        FileManager.default.createFile(
          atPath: directory.appendingPathComponent("secret").path, contents: Data(legacy),
          attributes: [.posixPermissions: 0o600]))
      let before = TokenIssuer(secret: legacy).issue(uid: "alice", ttl: 3600)
      let service = try LarderService(options: LarderService.Options(dataDirectory: directory, policy: .rulesFile(exampleRulesURL)).onTestStores())
      defer { service.stop(timeout: .seconds(1)) }
      #expect(service.secret == legacy)
      #expect(try post(service, before).status == 200)
      // A token of another key is still refused: the key really is the adopted one.
      let stranger = TokenIssuer(secret: Array(repeating: 9, count: 32)).issue(uid: "alice", ttl: 3600)
      #expect(try post(service, stranger).status == 401)
      // A second node on the same store agrees on the key. On SQLite the catalog is in the data
      // directory, and with filesystem blobs the nodes share one (a second data directory
      // would be another blob store, which the store refuses): the node reopens it. With
      // blobs in S3 it has a data directory of its own, with no key file in it.
      try withDirectory { other in
        var options = LarderService.Options(dataDirectory: directory, policy: .rulesFile(exampleRulesURL))
        if case .postgres = service.larder.catalogLocation {
          options.catalog = service.larder.catalogLocation
          if TestBlobs.isS3 {
            options.dataDirectory = other
            options.blobs = TestStore.blobs(for: directory)
          }
        }
        let node = try LarderService(options: options.onTestStores())
        defer { node.stop(timeout: .seconds(1)) }
        #expect(node.secret == legacy)
        #expect(try post(node, before).status == 200)
        if options.dataDirectory == other {
          #expect(!FileManager.default.fileExists(atPath: other.appendingPathComponent("secret").path))
        }
      }
    }
  }

  @Test func aNewStoreKeepsItsKeyInTheCatalogOnly() throws {
    try withDirectory { directory in
      let service = try LarderService(options: LarderService.Options(dataDirectory: directory, policy: .rulesFile(exampleRulesURL)).onTestStores())
      defer { service.stop(timeout: .seconds(1)) }
      #expect(service.secret.count == 32)
      #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("secret").path))
      #expect(try post(service, service.developmentToken(uid: "alice")).status == 200)
      let row = try service.larder.catalog.read { db in
        try db.row("SELECT value FROM settings WHERE key = 'token_secret'")?.bytes("value")
      }
      #expect(row == service.secret)
      let again = try LarderService(options: LarderService.Options(dataDirectory: directory, policy: .allowAll).onTestStores())
      defer { again.stop(timeout: .seconds(1)) }
      #expect(again.secret == service.secret)
    }
  }
}
