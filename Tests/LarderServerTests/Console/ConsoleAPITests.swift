import Foundation
import Larder
import LarderAuth
import LarderServer
import Testing

/// The console's own calls (`/console/v1/…`, ``ConsoleAPI``) and the GCS `buckets.insert` it
/// uses, in process, with exact statuses and bodies.
@Suite struct ConsoleAPITests {
  /// Signed-in users may do anything under `shared/` except delete a name containing "locked".
  static let rules = """
    rules_version = '2';
    service firebase.storage {
      match /b/{bucket}/o {
        match /shared/{path=**} {
          allow read, create, update: if request.auth != null;
          allow delete: if request.auth != null && !resource.name.matches('.*locked.*');
        }
        match /hidden/{path=**} {
          allow delete: if request.auth != null;
        }
        match /mixed {
          allow list: if request.auth != null;
        }
        match /mixed/{file} {
          allow get, delete: if request.auth != null;
        }
        match /mixed/deep/{path=**} {
          allow delete: if request.auth != null;
        }
      }
    }
    """

  func withRules<T>(
    configure: (inout LarderService.Options) -> Void = { _ in }, _ body: (InProcessService) throws -> T
  ) throws -> T {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("console-\(UUID().uuidString).rules")
    try Self.rules.write(to: file, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(at: file) }
    return try withInProcessService(policy: .rulesFile(file), configure: configure, body)
  }

  func adminToken(_ s: InProcessService) throws -> String {
    let created = try ServiceAccounts.create(name: "ops", publicURL: "http://larder.test", in: s.service.larder)
    let secret = try #require(s.service.context.serviceAccounts?.secret)
    return ServiceAccountAccessToken.issue(
      secret: secret, clientEmail: created.record.clientEmail, keyID: created.record.keyID,
      scope: "https://www.googleapis.com/auth/devstorage.full_control")
  }

  func bearer(_ token: String) -> [(String, String)] { [("Authorization", "Bearer \(token)")] }

  func put(_ s: InProcessService, _ name: String, token: String) throws {
    let r = try s.send(
      .init("POST", "/v0/b/app/o?name=\(name.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)",
        headers: bearer(token), body: Array(name.utf8)))
    #expect(r.status == 200, "\(name): \(r.text)")
  }

  // MARK: session

  @Test func sessionWithoutATokenIs401() throws {
    try withRules { s in
      let r = try s.send(.init("GET", "/console/v1/session"))
      #expect(r.status == 401)
      #expect(r.route == "console.session")
      #expect(r.text == #"{"error":{"code":401,"message":"an Authorization: Bearer <token> header is required","status":"UNAUTHENTICATED"}}"#)
    }
  }

  @Test func sessionRefusesAGarbageTokenAndAnExpiredOneSayingWhy() throws {
    try withRules { s in
      let garbage = try s.send(.init("GET", "/console/v1/session", headers: bearer("hello")))
      #expect(garbage.status == 401)
      #expect(garbage.json.flatMap { ($0["error"] as? [String: Any])?["message"] as? String }?.hasPrefix("malformed token") == true, "\(garbage.text)")
      let expired = try s.send(
        .init("GET", "/console/v1/session", headers: bearer(s.service.developmentToken(uid: "dev", ttl: -3600))))
      #expect(expired.status == 401)
      let message = try #require(expired.json.flatMap { ($0["error"] as? [String: Any])?["message"] as? String })
      #expect(message.wholeMatch(of: /token expired at \d+ \(unix time\)/) != nil, "\(message)")
    }
  }

  @Test func sessionAnswersAUserWithTheConfiguredBuckets() throws {
    try withRules(configure: { $0.consoleBuckets = ["app", "photos"] }) { s in
      let token = s.service.developmentToken(uid: "alice", ttl: 600)
      let r = try s.send(.init("GET", "/console/v1/session", headers: bearer(token)))
      #expect(r.status == 200, "\(r.text)")
      #expect(r["Cache-Control"] == "no-store")
      let json = try #require(r.json)
      let exp = try #require(json["expiresAt"] as? Int)
      #expect(abs(exp - Int(Date().timeIntervalSince1970) - 600) <= 5)
      #expect(r.text == #"{"admin":false,"buckets":["app","photos"],"expiresAt":\#(exp),"subject":"alice"}"#)
    }
  }

  @Test func sessionSaysAServiceAccountIsAnAdmin() throws {
    try withRules { s in
      let r = try s.send(.init("GET", "/console/v1/session", headers: bearer(try adminToken(s))))
      #expect(r.status == 200, "\(r.text)")
      let json = try #require(r.json)
      #expect(json["admin"] as? Bool == true)
      #expect((json["serviceAccount"] as? String)?.hasPrefix("ops@") == true, "\(r.text)")
      #expect(json["buckets"] as? [String] == ["app"])
    }
  }

  // MARK: deleteFolder

  @Test func deleteFolderDeletesWhatTheRulesAllowAndNamesWhatTheyRefuse() throws {
    try withRules { s in
      let token = s.service.developmentToken(uid: "alice")
      for name in ["shared/f/a.txt", "shared/f/sub/b.txt", "shared/f/locked.txt", "shared/f/", "shared/other.txt"] {
        try put(s, name, token: token)
      }
      let before = try s.service.larder.events.outbox().count
      let r = try s.send(
        .init("POST", "/console/v1/b/app/deleteFolder?prefix=shared%2Ff%2F", headers: bearer(token)))
      #expect(r.status == 200, "\(r.text)")
      #expect(r.route == "console.deleteFolder")
      #expect(
        r.text
          == #"{"deleted":["shared/f/","shared/f/a.txt","shared/f/sub/b.txt"],"refused":[{"name":"shared/f/locked.txt","reason":"the rules do not allow you to delete it"}],"unlisted":0}"#
      )
      let left = try s.service.larder.objects.list(bucket: "app", prefix: "shared/").items.map(\.name)
      #expect(left == ["shared/f/locked.txt", "shared/other.txt"])
      // Each delete went through the store's delete: one `deleted` event per object, in order.
      let events = try s.service.larder.events.outbox().dropFirst(before)
      #expect(events.map(\.kind) == [.deleted, .deleted, .deleted])
      #expect(events.map(\.object.name) == ["shared/f/", "shared/f/a.txt", "shared/f/sub/b.txt"])
    }
  }

  @Test func aLargeFolderIsDeletedInBatchesWithAPageToken() throws {
    try withRules { s in
      let token = s.service.developmentToken(uid: "alice")
      let batch = 100  // ConsoleAPI.batchSize
      for i in 0..<(batch * 2 + 5) { try put(s, "shared/big/f\(1000 + i).txt", token: token) }
      var pageToken: String?
      var batches: [Int] = []
      repeat {
        let query = "prefix=shared%2Fbig%2F" + (pageToken.map { "&pageToken=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)" } ?? "")
        let r = try s.send(.init("POST", "/console/v1/b/app/deleteFolder?\(query)", headers: bearer(token)))
        #expect(r.status == 200, "\(r.text)")
        let json = try #require(r.json)
        batches.append((json["deleted"] as? [String])?.count ?? -1)
        pageToken = json["nextPageToken"] as? String
      } while pageToken != nil && batches.count < 10
      #expect(batches == [batch, batch, 5])
      #expect(try s.service.larder.objects.list(bucket: "app", prefix: "shared/big/").items.isEmpty)
    }
  }

  @Test func deleteFolderRefusesBadInputAndAFolderThatMayNotBeListed() throws {
    try withRules { s in
      let token = s.service.developmentToken(uid: "alice")
      try put(s, "shared/f/a.txt", token: token)
      let notAFolder = try s.send(
        .init("POST", "/console/v1/b/app/deleteFolder?prefix=shared%2Ff", headers: bearer(token)))
      #expect(notAFolder.status == 400)
      #expect(notAFolder.text == #"{"error":{"code":400,"message":"prefix must name a folder: non-empty, ending in '/'","status":"INVALID_ARGUMENT"}}"#)
      let missing = try s.send(.init("POST", "/console/v1/b/app/deleteFolder", headers: bearer(token)))
      #expect(missing.status == 400)
      // `hidden/` may not be listed: nothing under it is deleted, even where delete is allowed.
      _ = try s.service.larder.objects.put(bucket: "app", name: "hidden/x.txt", data: Data([1]))
      let hidden = try s.send(
        .init("POST", "/console/v1/b/app/deleteFolder?prefix=hidden%2F", headers: bearer(token)))
      #expect(hidden.status == 403)
      #expect(hidden.text == #"{"error":{"code":403,"message":"permission denied","status":"PERMISSION_DENIED"}}"#)
      #expect(try s.service.larder.objects.find(ObjectPath(bucket: "app", name: "hidden/x.txt")) != nil)
      let anonymous = try s.send(.init("POST", "/console/v1/b/app/deleteFolder?prefix=shared%2Ff%2F"))
      #expect(anonymous.status == 403)
      #expect(try s.service.larder.objects.find(ObjectPath(bucket: "app", name: "shared/f/a.txt")) != nil)
    }
  }

  /// Objects in a subfolder the caller may not list are neither deleted nor named, only
  /// counted, even where the rules would let the caller delete them.
  @Test func objectsInAFolderThatMayNotBeListedAreCountedNotDeleted() throws {
    try withRules { s in
      let token = s.service.developmentToken(uid: "alice")
      for name in ["mixed/a.txt", "mixed/deep/b.txt", "mixed/deep/c.txt"] {
        _ = try s.service.larder.objects.put(bucket: "app", name: name, data: Data(name.utf8))
      }
      let r = try s.send(
        .init("POST", "/console/v1/b/app/deleteFolder?prefix=mixed%2F", headers: bearer(token)))
      #expect(r.status == 200, "\(r.text)")
      #expect(r.text == #"{"deleted":["mixed/a.txt"],"refused":[],"unlisted":2}"#)
      let left = try s.service.larder.objects.list(bucket: "app", prefix: "mixed/").items.map(\.name)
      #expect(left == ["mixed/deep/b.txt", "mixed/deep/c.txt"])
    }
  }

  // MARK: buckets.insert

  @Test func anAdminCreatesABucketAUserMayNot() throws {
    try withRules { s in
      let admin = try adminToken(s)
      let body = Array(#"{"name":"photos-2026"}"#.utf8)
      let made = try s.send(.init("POST", "/storage/v1/b?project=larder", headers: bearer(admin), body: body))
      #expect(made.status == 200, "\(made.text)")
      #expect(made.route == "gcs.buckets.insert")
      let json = try #require(made.json)
      #expect(json["name"] as? String == "photos-2026" && json["kind"] as? String == "storage#bucket")

      let user = try s.send(
        .init("POST", "/storage/v1/b?project=larder", headers: bearer(s.service.developmentToken(uid: "alice")), body: body))
      #expect(user.status == 403)
      let anonymous = try s.send(.init("POST", "/storage/v1/b?project=larder", body: body))
      #expect(anonymous.status == 401)

      let short = try s.send(
        .init("POST", "/storage/v1/b?project=larder", headers: bearer(admin), body: Array(#"{"name":"a"}"#.utf8)))
      #expect(short.status == 400)
      #expect(short.text.contains("it is shorter than 3 characters"), "\(short.text)")
      let noName = try s.send(.init("POST", "/storage/v1/b?project=larder", headers: bearer(admin), body: Array("{}".utf8)))
      #expect(noName.status == 400)

      try put(s, "shared/x.txt", token: s.service.developmentToken(uid: "alice"))
      let taken = try s.send(
        .init("POST", "/storage/v1/b?project=larder", headers: bearer(admin), body: Array(#"{"name":"app"}"#.utf8)))
      #expect(taken.status == 409)
      #expect(taken.text.contains("a bucket named app already exists"), "\(taken.text)")
    }
  }

  // MARK: per-bucket usage

  @Test func theStoreAnswersEachBucketsObjectsAndBytes() throws {
    try withRules { s in
      let admin = try adminToken(s)
      for (bucket, name, size) in [("app", "a", 100), ("app", "b", 20), ("photos", "c", 7)] {
        let r = try s.send(
          .init("POST", "/v0/b/\(bucket)/o?name=\(name)", headers: bearer(admin), body: [UInt8](repeating: 1, count: size)))
        #expect(r.status == 200, "\(r.text)")
      }
      let r = try s.send(.init("GET", "/admin/v1/store", headers: bearer(admin)))
      let json = try #require(r.json)
      let buckets = try #require(json["buckets"] as? [[String: Any]])
      #expect(buckets.map { $0["name"] as? String } == ["app", "photos"])
      #expect(buckets.map { $0["objectCount"] as? Int } == [2, 1])
      #expect(buckets.map { $0["logicalBytes"] as? Int } == [120, 7])
      #expect(json["logicalBytes"] as? Int == 127)
    }
  }
}
