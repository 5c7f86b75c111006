import Foundation
import LarderServer
import Synchronization
import Testing

/// A policy tests can flip: allow everything while seeding, then deny everything.
final class SwitchPolicy: AccessPolicy {
  let allowing = Atomic<Bool>(true)
  let asked = Mutex<[AccessOperation]>([])
  func decide(_ request: AccessRequest) -> AccessDecision {
    asked.withLock { $0.append(request.operation) }
    return allowing.load(ordering: .relaxed) ? .allow("test") : .deny("test denies")
  }
}

/// Access decisions through the policy interface, tokens and credentials.
@Suite struct AccessControlTests {
  func expectDenied(_ r: WireResponse, _ label: String) {
    #expect(r.status == 403, "\(label): \(r.status) \(r.text.prefix(200))")
    #expect(r.error?["code"] as? Int == 403, "\(label)")
    #expect(r.error?["status"] as? String == "PERMISSION_DENIED", "\(label)")
    #expect(r.error?["message"] as? String == "permission denied", "\(label)")
  }

  @Test func denyAllPolicyRefusesEveryVerbAndChangesNothing() throws {
    let policy = SwitchPolicy()
    try withService(policy: .custom(policy)) { s in
      let seeded = try s.upload("secret.txt", Array("top secret\n".utf8))
      let before = try s.send(.get("/v0/b/app/o/secret.txt")).body
      policy.allowing.store(false, ordering: .relaxed)

      expectDenied(try s.send(.get("/v0/b/app/o/secret.txt")), "get")
      expectDenied(try s.send(.get("/v0/b/app/o/secret.txt?alt=media")), "media")
      expectDenied(try s.send(.get("/v0/b/app/o/missing")), "get missing (no existence leak)")
      expectDenied(try s.send(.get("/v0/b/app/o")), "list")
      expectDenied(try s.send(.init("DELETE", "/v0/b/app/o/secret.txt")), "delete")
      expectDenied(try s.send(.init("PATCH", "/v0/b/app/o/secret.txt", body: Array(#"{"cacheControl":"x"}"#.utf8))), "patch")
      let up = try WireConnection(port: s.port)
      try up.send(WireRequest("POST", "/v0/b/app/o?name=secret.txt", body: [1, 2, 3]).head(closing: true))
      expectDenied(try up.readResponse(), "overwrite")
      let up2 = try WireConnection(port: s.port)
      try up2.send(WireRequest("POST", "/v0/b/app/o?name=new.txt", body: [1, 2, 3]).head(closing: true))
      expectDenied(try up2.readResponse(), "create")
      let head = try s.send(.head("/v0/b/app/o/secret.txt?alt=media"))
      #expect(head.status == 403)
      #expect(head.body.isEmpty)

      policy.allowing.store(true, ordering: .relaxed)
      #expect(try s.send(.get("/v0/b/app/o/secret.txt")).body == before)
      #expect(try s.send(.get("/v0/b/app/o/new.txt")).status == 404)
      #expect(try s.send(.get("/v0/b/app/o/secret.txt?alt=media")).text == "top secret\n")
      #expect(seeded["metageneration"] as? String == "1")
      #expect(s.tmpEntries() == [])
      let ops = Set(policy.asked.withLock { $0 })
      #expect(ops == [.create, .get, .list, .update, .delete])
    }
  }

  @Test func brokenBearerTokenIs401() throws {
    try withInProcessService { s in
      try s.upload("a", [1])
      for value in ["Bearer garbage", "Bearer a.b.c", "Basic dXNlcjpwYXNz", "Firebase ", "Bearer"] {
        let r = try s.send(.get("/v0/b/app/o/a", [("Authorization", value)]))
        #expect(r.status == 401, "\(value)")
        #expect(r.error?["code"] as? Int == 401, "\(value)")
        #expect(r.error?["status"] as? String == "UNAUTHENTICATED", "\(value)")
        #expect(r["WWW-Authenticate"]?.hasPrefix("Bearer") == true, "\(value)")
      }
      // A token signed with this data directory's secret is accepted.
      let token = s.service.developmentToken(uid: "u1")
      #expect(try s.send(.get("/v0/b/app/o/a?alt=media", [("Authorization", "Bearer \(token)")])).body == [1])
    }
  }

  @Test func downloadTokenGrantsOnlyMediaOfItsObject() throws {
    let policy = SwitchPolicy()
    try withInProcessService(policy: .custom(policy)) { s in
      let a = try s.upload("a.bin", [10, 20, 30])
      try s.upload("b.bin", [40, 50])
      let token = try #require((a["downloadTokens"] as? String)?.split(separator: ",").first.map(String.init))
      policy.allowing.store(false, ordering: .relaxed)

      let r = try s.send(.get("/v0/b/app/o/a.bin?alt=media&token=\(enc(token))"))
      #expect(r.status == 200)
      #expect(r.body == [10, 20, 30])
      let ranged = try s.send(.get("/v0/b/app/o/a.bin?alt=media&token=\(enc(token))", [("Range", "bytes=1-1")]))
      #expect(ranged.status == 206)
      #expect(ranged.body == [20])
      expectDenied(try s.send(.get("/v0/b/app/o/a.bin?token=\(enc(token))")), "metadata with token")
      expectDenied(try s.send(.get("/v0/b/app/o/b.bin?alt=media&token=\(enc(token))")), "other object")
      expectDenied(try s.send(.get("/v0/b/app/o/a.bin?alt=media&token=wrong")), "wrong token")
      expectDenied(try s.send(.get("/v0/b/app/o/a.bin?alt=media&token=")), "empty token")
      expectDenied(try s.send(.init("DELETE", "/v0/b/app/o/a.bin?token=\(enc(token))")), "delete with token")

      // Rotating the token revokes the old one.
      policy.allowing.store(true, ordering: .relaxed)
      let rotated = try #require(
        try s.send(.init("PATCH", "/v0/b/app/o/a.bin", body: Array(#"{"rotateDownloadToken":true}"#.utf8))).json)
      let fresh = try #require(rotated["downloadTokens"] as? String)
      policy.allowing.store(false, ordering: .relaxed)
      expectDenied(try s.send(.get("/v0/b/app/o/a.bin?alt=media&token=\(enc(token))")), "old token")
      #expect(try s.send(.get("/v0/b/app/o/a.bin?alt=media&token=\(enc(fresh))")).body == [10, 20, 30])
    }
  }
}
