import Foundation
import LarderCrypto
import LarderServer
import Testing

/// Hostile credentials, names and paths: each is answered with a 4xx, quickly, and nothing is stored.
@Suite struct HostileAuthTests {
  @Test func oversizedAndGarbageCredentialsAreRefused() throws {
    try withRulesService { s in
      // 100 KB of Authorization: larger than any header block the server accepts.
      let huge = try s.send(
        .get(
          "/v0/b/app/o/public%2Fa", [("Authorization", "Bearer " + String(repeating: "A", count: 100_000))]))
      #expect(huge.status == 431)
      // 6 KB: under the header limit, over the token limit.
      let long = try s.send(
        .get("/v0/b/app/o/public%2Fa", [("Authorization", "Bearer " + String(repeating: "A", count: 6_000))]))
      #expect(long.status == 401)
      #expect(long.error?["status"] as? String == "UNAUTHENTICATED")
      for garbage in [
        "Bearer !!!.???.***", "Bearer ====.====.====", "Bearer ..", "Bearer a.b", "Bearer \u{7f}",
        "Firebase a.b.c.d",
      ] {
        let r = try s.send(.get("/v0/b/app/o/public%2Fa", [("Authorization", garbage)]))
        #expect(r.status == 401, "\(garbage.debugDescription): \(r.status)")
        #expect(r["WWW-Authenticate"] == "Bearer", "\(garbage.debugDescription)")
      }
      // A header that is valid base64url but deeply nested JSON: refused before the decoder
      // recurses, and before the (valid) signature is looked at.
      let nested = #"{"alg":"HS256","x":"# + String(repeating: "[", count: 3_000) + String(repeating: "]", count: 3_000) + "}"
      let payload = enc64(#"{"sub":"alice"}"#)
      let input = enc64(nested) + "." + payload
      let signature = Base64URL.encode(HMAC.sha256(key: s.service.secret, message: Array(input.utf8)))
      let deep = try s.send(
        .get("/v0/b/app/o/public%2Fa", [("Authorization", "Bearer \(input).\(signature)")]))
      #expect(deep.status == 401)
      #expect(deep.error?["message"] as? String == "malformed token: header is not a JSON object")
      // The same header 31 levels deep is read, so the depth is what was refused above.
      let shallow = #"{"alg":"none","x":"# + String(repeating: "[", count: 30) + String(repeating: "]", count: 30) + "}"
      let readable = try s.send(
        .get("/v0/b/app/o/public%2Fa", [("Authorization", "Bearer \(enc64(shallow)).\(payload).AAAA")]))
      #expect(readable.status == 401)
      #expect(readable.error?["message"] as? String == #"unsupported token algorithm "none""#)
      #expect(try s.rowCounts() == ["objects": 0, "files": 0, "blobs": 0])
    }
  }

  @Test func longNamesTokensAndDeepPathsAreRefused() throws {
    try withInProcessRulesService { s in
      let alice = s.auth("alice")
      let kib4 = String(repeating: "n", count: 4096)
      // A 4 KiB object name with a 4 KiB download token: the name is invalid (over 1024 bytes).
      let r = try s.send(.get("/v0/b/app/o/public%2F\(kib4)?alt=media&token=\(kib4)"))
      #expect(r.status == 400)
      // A 1000-segment name, anonymous and as its would-be owner.
      let deep = "users/alice/" + Array(repeating: "a", count: 1000).joined(separator: "/")
      #expect(
        try s.send(.init("POST", "/v0/b/app/o?name=\(enc(deep))", headers: alice, body: [1])).status == 400)
      #expect(try s.send(.get("/v0/b/app/o/\(enc(deep))")).status == 400)
      #expect(try s.rowCounts() == ["objects": 0, "files": 0, "blobs": 0])
    }
  }

  /// The policy itself, past the name validation: deep and long paths finish and deny.
  @Test func rulesOnAThousandSegmentPathDeny() throws {
    let policy = try RulesPolicy(file: exampleRulesURL)
    let deepForeign = "users/alice/" + Array(repeating: "a", count: 1000).joined(separator: "/")
    let foreign = policy.decide(
      AccessRequest(operation: .get, bucket: "app", name: deepForeign, identity: Identity(uid: "bob")))
    #expect(!foreign.allowed)
    let unmatched = policy.decide(
      AccessRequest(
        operation: .get, bucket: "app", name: Array(repeating: "z", count: 1000).joined(separator: "/"),
        identity: nil))
    #expect(!unmatched.allowed)
    // A 4096-byte segment that is the caller's own uid: matched and allowed, not refused for length.
    let longUID = String(repeating: "u", count: 4096)
    let longSegment = policy.decide(
      AccessRequest(
        operation: .create, bucket: "app", name: "images/\(longUID)/x.png", identity: Identity(uid: longUID),
        incoming: AccessResource(bucket: "app", name: "x", size: 1, contentType: "image/png")))
    #expect(longSegment.allowed, "\(longSegment.reason)")
    // Over the 8192-byte name limit: denied for that reason, before any rule runs.
    let tooLong = policy.decide(
      AccessRequest(
        operation: .get, bucket: "app", name: "public/" + String(repeating: "n", count: 9000),
        identity: Identity(uid: "alice")))
    #expect(!tooLong.allowed)
    #expect(tooLong.reason == "DENY: object name longer than 8192 bytes")
    // The owner of a deep path in their own folder is allowed: depth alone is not refused.
    #expect(
      policy.decide(
        AccessRequest(operation: .get, bucket: "app", name: deepForeign, identity: Identity(uid: "alice"))
      ).allowed)
  }

  func enc64(_ s: String) -> String { Base64URL.encode(Array(s.utf8)) }
}
