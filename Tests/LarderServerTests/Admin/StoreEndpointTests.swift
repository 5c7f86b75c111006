import Foundation
import Larder
import LarderAuth
import LarderServer
import Testing

/// `GET /admin/v1/store` (the console's Store view), in process under `storage.rules.example`.
@Suite struct StoreEndpointTests {
  /// A service account's access token: the admin identity that may read the counts.
  func adminToken(_ s: InProcessService) throws -> String {
    let created = try ServiceAccounts.create(
      name: "ops", publicURL: "http://larder.test", in: s.service.larder)
    let secret = try #require(s.service.context.serviceAccounts?.secret)
    return ServiceAccountAccessToken.issue(
      secret: secret, clientEmail: created.record.clientEmail, keyID: created.record.keyID, scope: "https://www.googleapis.com/auth/devstorage.full_control")
  }

  func store(_ s: InProcessService, token: String?) throws -> WireResponse {
    try s.send(
      .init("GET", "/admin/v1/store", headers: token.map { [("Authorization", "Bearer \($0)")] } ?? []))
  }

  @Test func withoutATokenIs401() throws {
    try withInProcessRulesService { s in
      let r = try store(s, token: nil)
      #expect(r.status == 401, "\(r.text)")
      #expect(r.route == "admin.store")
    }
  }

  @Test func aUserWhoIsNotAnAdminIs403() throws {
    try withInProcessRulesService { s in
      let r = try store(s, token: s.service.developmentToken(uid: "alice"))
      #expect(r.status == 403, "\(r.text)")
      #expect(!r.text.contains("objects\""))
    }
  }

  @Test func anAdminReadsExactCountsAfterKnownUploads() throws {
    try withInProcessRulesService { s in
      let admin = try adminToken(s)
      let auth = [("Authorization", "Bearer \(admin)")]
      let shared = [UInt8](repeating: 7, count: 100)
      let other = [UInt8](repeating: 9, count: 50)
      for (name, body) in [("a.bin", shared), ("copy-of-a.bin", shared), ("c.bin", other)] {
        let r = try s.send(.init("POST", "/v0/b/app/o?name=stats%2F\(name)", headers: auth, body: body))
        #expect(r.status == 200, "\(r.text)")
      }
      // A resumable upload with 10 of its 1000 bytes received.
      let created = try s.send(
        .init(
          "POST", "/v0/b/app/uploads",
          headers: auth + [
            ("Tus-Resumable", "1.0.0"), ("Upload-Length", "1000"),
            ("Upload-Metadata", "name \(Data("stats/big.bin".utf8).base64EncodedString())"),
          ]))
      #expect(created.status == 201, "\(created.text)")
      let location = try #require(created["Location"])
      let path = try #require(URL(string: location, relativeTo: URL(string: "http://127.0.0.1/"))?.path)
      let patched = try s.send(
        .init(
          "PATCH", path,
          headers: auth + [
            ("Tus-Resumable", "1.0.0"), ("Upload-Offset", "0"),
            ("Content-Type", "application/offset+octet-stream"),
          ], body: [UInt8](repeating: 1, count: 10)))
      #expect(patched.status == 204, "\(patched.text)")
      // Deleting c.bin leaves its blob collectable.
      #expect(try s.send(.init("DELETE", "/v0/b/app/o/stats%2Fc.bin", headers: auth)).status == 204)

      let r = try store(s, token: admin)
      #expect(r.status == 200, "\(r.text)")
      #expect(r["Cache-Control"] == "no-store")
      let json = try #require(r.json)
      #expect(json["objects"] as? Int == 2)
      #expect(json["logicalBytes"] as? Int == 200)
      #expect(json["blobs"] as? Int == 2)
      #expect(json["storedBytes"] as? Int == 150)
      #expect(json["dedupSavedBytes"] as? Int == 50)
      #expect(json["files"] as? Int == 3)
      #expect(json["collectable"] as? [String: Int] == ["blobs": 1, "bytes": 50])
      #expect(json["uploadsInProgress"] as? [String: Int] == ["count": 1, "bytes": 10])
      #expect(json["lastGC"] == nil)
      #expect(json["metrics"] as? String == "/metrics")
      #expect((json["buckets"] as? [[String: Any]])?.first?["objectCount"] as? Int == 2)

      // A collection frees the blob and is reported as the last gc.
      _ = try GarbageCollector(larder: s.service.larder).collect(options: .init(grace: .zero))
      let after = try #require(try store(s, token: admin).json)
      #expect(after["blobs"] as? Int == 1)
      #expect(after["storedBytes"] as? Int == 100)
      #expect(after["dedupSavedBytes"] as? Int == 100)
      #expect(after["collectable"] as? [String: Int] == ["blobs": 0, "bytes": 0])
      let last = try #require(after["lastGC"] as? [String: Any])
      #expect(last["blobsRemoved"] as? Int == 1)
      #expect(last["bytesFreed"] as? Int == 50)
      #expect((last["finishedAt"] as? String)?.hasSuffix("Z") == true)
    }
  }

  @Test func aDryRunIsNotRecordedAsTheLastGC() throws {
    try withInProcessRulesService { s in
      let admin = try adminToken(s)
      _ = try GarbageCollector(larder: s.service.larder).collect(options: .init(grace: .zero, dryRun: true))
      let json = try #require(try store(s, token: admin).json)
      #expect(json["lastGC"] == nil)
      #expect(json["objects"] as? Int == 0)
    }
  }
}
