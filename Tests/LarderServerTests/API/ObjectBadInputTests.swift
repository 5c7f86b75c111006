import Foundation
import LarderCrypto
import Testing

/// Malformed integrity and precondition parameters on object writes: 400 (or 412), nothing changed.
/// Driven in process (`HTTPTestDriver`): the same routes and sinks, no socket.
@Suite struct ObjectBadInputTests {
  static let body = Array("checked bytes".utf8)

  func post(
    _ s: InProcessService, _ name: String, headers: [(String, String)] = [], query: String = "", body: [UInt8] = body
  ) throws -> WireResponse
  {
    try s.send(.init("POST", "/v0/b/app/o?name=\(enc(name))\(query)", headers: headers, body: body))
  }

  @Test func contentMD5MustBeAWellFormedMatchingDigest() throws {
    try withInProcessService { s in
      let md5 = Digest.hash(.md5, Self.body)
      for (label, value) in [
        ("not base64", "nope"), ("15 bytes", Data(md5.prefix(15)).base64EncodedString()),
        ("wrong digest", Data(Digest.hash(.md5, Array("other".utf8))).base64EncodedString()),
      ] {
        let r = try post(s, "m.txt", headers: [("Content-MD5", value)])
        #expect(r.status == 400, "\(label): \(r.status) \(r.text)")
        #expect(try s.send(.get("/v0/b/app/o/m.txt")).status == 404, "\(label)")
      }
      #expect(try s.rowCounts() == ["objects": 0, "files": 0, "blobs": 0])
      let right = try post(s, "m.txt", headers: [("Content-MD5", Data(md5).base64EncodedString())])
      #expect(right.status == 200, "\(right.text)")
      #expect(right.json?["md5Hash"] as? String == Data(md5).base64EncodedString())
      #expect(try s.send(.get("/v0/b/app/o/m.txt?alt=media")).body == Self.body)
    }
  }

  @Test func ifGenerationMatchMustBeANonNegativeInteger() throws {
    try withInProcessService { s in
      let first = try s.upload("g.txt", Self.body)
      let generation = try #require(first["generation"] as? String)
      for bad in ["abc", "-1", ""] {
        let post = try post(s, "g.txt", query: "&ifGenerationMatch=\(enc(bad))", body: Array("new".utf8))
        #expect(post.status == 400, "POST ifGenerationMatch=\(bad.debugDescription): \(post.status) \(post.text)")
        let delete = try s.send(.init("DELETE", "/v0/b/app/o/g.txt?ifGenerationMatch=\(enc(bad))"))
        #expect(delete.status == 400, "DELETE ifGenerationMatch=\(bad.debugDescription): \(delete.status) \(delete.text)")
      }
      let stale = String((Int64(generation) ?? 0) + 1)
      let post = try post(s, "g.txt", query: "&ifGenerationMatch=\(stale)", body: Array("new".utf8))
      #expect(post.status == 412)
      #expect(post.error?["status"] as? String == "FAILED_PRECONDITION")
      let delete = try s.send(.init("DELETE", "/v0/b/app/o/g.txt?ifGenerationMatch=\(stale)"))
      #expect(delete.status == 412)
      #expect(delete.error?["status"] as? String == "FAILED_PRECONDITION")
      #expect(try s.send(.get("/v0/b/app/o/g.txt?alt=media")).body == Self.body)
      let meta = try s.send(.get("/v0/b/app/o/g.txt"))
      #expect(meta.json?["generation"] as? String == generation)
    }
  }
}
