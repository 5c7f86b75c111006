import Foundation
import LarderServer
import Testing

/// `storage.rules.example` through the resumable (tus) API.
@Suite struct TusRulesTests {
  static func metadata(_ pairs: [(String, String)]) -> String {
    pairs.map { "\($0.0) \(Data($0.1.utf8).base64EncodedString())" }.joined(separator: ",")
  }

  func create(_ s: some ServiceHarness, name: String, type: String, length: Int, _ auth: [(String, String)]) throws
    -> WireResponse
  {
    try s.send(
      .init(
        "POST", "/v0/b/app/uploads",
        headers: auth + [
          ("Tus-Resumable", "1.0.0"), ("Upload-Length", String(length)),
          ("Upload-Metadata", Self.metadata([("name", name), ("contentType", type)])),
        ]))
  }

  func patch(_ s: some ServiceHarness, _ path: String, offset: Int, _ body: [UInt8], _ auth: [(String, String)])
    throws -> WireResponse
  {
    try s.send(
      .init(
        "PATCH", path,
        headers: auth + [
          ("Tus-Resumable", "1.0.0"), ("Upload-Offset", String(offset)),
          ("Content-Type", "application/offset+octet-stream"),
        ], body: body))
  }

  func tus(_ method: String, _ path: String, _ auth: [(String, String)]) -> WireRequest {
    .init(method, path, headers: auth + [("Tus-Resumable", "1.0.0")])
  }

  /// The path part of a `Location` (absolute or relative).
  func path(_ location: String?) throws -> String {
    let l = try #require(location)
    guard let r = l.range(of: "/v0/") else { return l }
    return String(l[r.lowerBound...])
  }

  @Test func creationIsAskedOnDeclaredValues() throws {
    try withInProcessRulesService { s in
      let anon = try create(s, name: "users/alice/a.bin", type: "application/octet-stream", length: 3, [])
      #expect(anon.status == 403)
      #expect(anon.error?["status"] as? String == "PERMISSION_DENIED")
      #expect(
        try create(s, name: "users/alice/a.bin", type: "application/octet-stream", length: 3, s.auth("bob"))
          .status == 403)
      #expect(
        try create(s, name: "images/alice/a.png", type: "text/plain", length: 3, s.auth("alice")).status
          == 403)
      #expect(
        try create(
          s, name: "images/alice/a.png", type: "image/png", length: 5 * 1024 * 1024 + 1, s.auth("alice")
        ).status == 403)
      #expect(try s.rowCounts() == ["objects": 0, "files": 0, "blobs": 0])
    }
  }

  @Test func partialUploadsAreAskedLikeTheObjectTheyWillBecome() throws {
    try withInProcessRulesService { s in
      func partial(_ metadata: [(String, String)], _ auth: [(String, String)]) throws -> Int {
        try s.send(
          .init(
            "POST", "/v0/b/app/uploads",
            headers: auth + [
              ("Tus-Resumable", "1.0.0"), ("Upload-Length", "3"), ("Upload-Concat", "partial"),
              ("Upload-Metadata", Self.metadata(metadata)),
            ])
        ).status
      }
      // Nameless partial uploads match no rule of the example: nobody may park bytes that way.
      let nameless = try partial([], [])
      let namelessSigned = try partial([], s.auth("alice"))
      #expect(nameless == 403)
      #expect(namelessSigned == 403)
      // Named ones are asked as the object they will become.
      let anonymous = try partial([("name", "users/alice/part.bin")], [])
      let otherUser = try partial([("name", "users/alice/part.bin")], s.auth("bob"))
      let owner = try partial([("name", "users/alice/part.bin")], s.auth("alice"))
      #expect(anonymous == 403)
      #expect(otherUser == 403)
      #expect(owner == 201)
    }
  }

  @Test func textPosingAsImageIsRefusedAtTheLastByte() throws {
    try withInProcessRulesService { s in
      let alice = s.auth("alice")
      let text = Array("plain text that says it is a PNG\n".utf8)
      let created = try create(s, name: "images/alice/fake.png", type: "image/png", length: text.count, alice)
      #expect(created.status == 201)
      let upload = try path(created["Location"])
      let first = try patch(s, upload, offset: 0, Array(text[..<10]), alice)
      #expect(first.status == 204)
      #expect(first["Upload-Offset"] == "10")
      let last = try patch(s, upload, offset: 10, Array(text[10...]), alice)
      #expect(last.status == 403)
      #expect(last.error?["status"] as? String == "PERMISSION_DENIED")
      #expect(try s.send(.get("/v0/b/app/o/images%2Falice%2Ffake.png", alice)).status == 404)
      #expect(try s.rowCounts()["objects"] == 0)

      // A real PNG the same way is published.
      let ok = try create(s, name: "images/alice/dot.png", type: "image/png", length: tinyPNG.count, alice)
      #expect(try patch(s, try path(ok["Location"]), offset: 0, tinyPNG, alice).status == 204)
      #expect(try s.send(.get("/v0/b/app/o/images%2Falice%2Fdot.png?alt=media", alice)).body == tinyPNG)
      #expect(try s.rowCounts()["objects"] == 1)
    }
  }

  @Test func onlyTheCreatorMayTouchAnUpload() throws {
    try withInProcessRulesService { s in
      let alice = s.auth("alice")
      let created = try create(
        s, name: "users/alice/big.bin", type: "application/octet-stream", length: 8, alice)
      #expect(created.status == 201)
      let upload = try path(created["Location"])
      #expect(try patch(s, upload, offset: 0, [1, 2, 3, 4], alice).status == 204)
      for (label, other) in [("anonymous", [(String, String)]()), ("bob", s.auth("bob"))] {
        #expect(try s.send(tus("HEAD", upload, other)).status == 404, "\(label) HEAD")
        #expect(try patch(s, upload, offset: 4, [5, 6, 7, 8], other).status == 404, "\(label) PATCH")
        #expect(try s.send(tus("DELETE", upload, other)).status == 404, "\(label) DELETE")
      }
      let head = try s.send(tus("HEAD", upload, alice))
      #expect(head.status == 200)
      #expect(head["Upload-Offset"] == "4")
      #expect(try patch(s, upload, offset: 4, [5, 6, 7, 8], alice).status == 204)
      #expect(
        try s.send(.get("/v0/b/app/o/users%2Falice%2Fbig.bin?alt=media", alice)).body == [
          1, 2, 3, 4, 5, 6, 7, 8,
        ])

      let second = try path(
        try create(s, name: "users/alice/c.bin", type: "application/octet-stream", length: 2, alice)[
          "Location"])
      #expect(try s.send(tus("DELETE", second, s.auth("bob"))).status == 404)
      #expect(try s.send(tus("DELETE", second, alice)).status == 204)
      #expect(try s.send(tus("HEAD", second, alice)).status == 404)
    }
  }
}
