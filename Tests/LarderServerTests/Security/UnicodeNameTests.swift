import Foundation
import LarderServer
import Testing

/// Names and uids are told apart by their exact UTF-8 bytes on every route, in the object cache
/// and in the rules (issue 37): Swift's `String ==` is canonical equivalence, so an NFD name
/// once answered an NFC object's bytes and token from the cache, and a refused read spelled with
/// a Kelvin sign made the real `K…` object 404.
@Suite struct UnicodeNameTests {
  /// (the name written, another spelling never written): canonical twins, then compatibility ones.
  static let spellings: [(String, String)] = [
    ("caf\u{E9}.txt", "cafe\u{301}.txt"), ("cafe\u{301}.txt", "caf\u{E9}.txt"), ("Koala.png", "\u{212A}oala.png"),
    ("\u{212A}oala.png", "Koala.png"), ("\u{FB01}le.txt", "file.txt"), ("\u{FF46}ull.txt", "full.txt"),
  ]

  /// Every byte but ASCII letters, digits, `.`, `-` and `_` percent-encoded.
  static func enc(_ name: String) -> String {
    name.utf8.map { b in
      (b.isASCIIAlphanumeric || b == 0x2E || b == 0x2D || b == 0x5F) ? String(UnicodeScalar(b)) : String(format: "%%%02X", b)
    }.joined()
  }

  @Test(arguments: spellings)
  func anotherSpellingIsAnotherObjectOnEveryRoute(_ written: String, _ other: String) throws {
    try withInProcessRulesService { s in
      let name = "public/u1/" + written
      let twin = "public/u1/" + other
      let body = Array("bytes of \(written)".utf8)
      let up = try s.send(.init("POST", "/v0/b/app/o?name=\(Self.enc(name))", headers: s.auth("u1"), body: body))
      #expect(up.status == 200, "\(up.text)")
      // The twin is looked up first (anonymous, as the red team did), then the real one, then the twin again.
      #expect(try s.send(.get("/v0/b/app/o/\(Self.enc(twin))?alt=media")).status == 404)
      let real = try s.send(.get("/v0/b/app/o/\(Self.enc(name))?alt=media"))
      #expect(real.status == 200 && real.body == body, "the real object after its twin was asked: \(real.status)")
      let metadata = try s.send(.get("/v0/b/app/o/\(Self.enc(name))"))
      #expect(metadata.status == 200 && metadata.json?["name"] as? String == name)
      for target in [
        "/v0/b/app/o/\(Self.enc(twin))?alt=media", "/v0/b/app/o/\(Self.enc(twin))",
        "/storage/v1/b/app/o/\(Self.enc(twin))?alt=media", "/storage/v1/b/app/o/\(Self.enc(twin))",
      ] {
        let r = try s.send(.get(target))
        #expect(r.status == 404, "\(target) answered \(r.status): \(r.text.prefix(120))")
        #expect(!r.text.contains("downloadTokens") && r.body != body, "\(target) leaked the other spelling's object")
      }
      // Listing by the twin's prefix finds nothing; by the real one, the object.
      let listed = try s.send(.get("/storage/v1/b/app/o?prefix=\(Self.enc(twin))"))
      #expect(listed.status == 200 && (listed.json?["items"] as? [Any] ?? []).isEmpty, "\(listed.text)")
      let found = try s.send(.get("/storage/v1/b/app/o?prefix=\(Self.enc(name))"))
      #expect((found.json?["items"] as? [[String: Any]])?.map { $0["name"] as? String } == [name])
      // Deleting the twin deletes nothing.
      #expect(try s.send(.init("DELETE", "/v0/b/app/o/\(Self.enc(twin))", headers: s.auth("u1"))).status == 404)
      #expect(try s.send(.get("/v0/b/app/o/\(Self.enc(name))?alt=media")).body == body)
      #expect(try s.send(.init("DELETE", "/v0/b/app/o/\(Self.enc(name))", headers: s.auth("u1"))).status == 204)
    }
  }

  /// `users/{uid}` is the owner's only: a uid spelled with the Kelvin sign is not `K`, neither
  /// to the rules nor to an upload's owner check.
  @Test func aKelvinUidIsNotK() throws {
    let kelvin = "\u{212A}"
    try withInProcessRulesService { s in
      let denied = try s.send(.init("POST", "/v0/b/app/o?name=users%2FK%2Fa.txt", headers: s.auth(kelvin), body: [1]))
      #expect(denied.status == 403, "a Kelvin-sign uid wrote under users/K/: \(denied.status)")
      #expect(try s.send(.init("POST", "/v0/b/app/o?name=users%2FK%2Fa.txt", headers: s.auth("K"), body: [1])).status == 200)
      #expect(try s.send(.get("/v0/b/app/o/users%2FK%2Fa.txt?alt=media", s.auth(kelvin))).status == 403)

      // A tus upload of `K`'s: another uid that Swift calls equal cannot see or append to it.
      let metadata = "name \(Data("users/K/big.bin".utf8).base64EncodedString())"
      let created = try s.send(
        .init(
          "POST", "/v0/b/app/uploads",
          headers: s.auth("K") + [("Tus-Resumable", "1.0.0"), ("Upload-Length", "3"), ("Upload-Metadata", metadata)]))
      #expect(created.status == 201, "\(created.text)")
      let location = try #require(created["Location"])
      let path = String(location[location.range(of: "/v0/")!.lowerBound...])
      let head = { (uid: String) in
        try s.send(.init("HEAD", path, headers: s.auth(uid) + [("Tus-Resumable", "1.0.0")])).status
      }
      #expect(try head("K") == 200)
      #expect(try head(kelvin) == 404, "the upload's owner K matched a Kelvin-sign uid")
      let patch = try s.send(
        .init(
          "PATCH", path,
          headers: s.auth(kelvin) + [
            ("Tus-Resumable", "1.0.0"), ("Upload-Offset", "0"), ("Content-Type", "application/offset+octet-stream"),
          ], body: [1, 2, 3]))
      #expect(patch.status == 404)
      #expect(try head("K") == 200)
    }
  }
}

extension UInt8 {
  fileprivate var isASCIIAlphanumeric: Bool {
    (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self)
  }
}
