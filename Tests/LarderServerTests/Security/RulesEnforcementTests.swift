import Foundation
import Larder
import LarderServer
import Testing

/// `storage.rules.example` enforced end to end on a live server.
@Suite struct RulesEnforcementTests {
  func expectDenied(_ r: WireResponse, _ label: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(r.status == 403, "\(label): \(r.status) \(r.text.prefix(200))", sourceLocation: sourceLocation)
    #expect(r.error?["status"] as? String == "PERMISSION_DENIED", "\(label)", sourceLocation: sourceLocation)
    #expect(r.error?["message"] as? String == "permission denied", "\(label)", sourceLocation: sourceLocation)
  }

  func post(_ name: String, _ body: [UInt8], _ headers: [(String, String)] = []) -> WireRequest {
    WireRequest("POST", "/v0/b/app/o?name=\(enc(name))", headers: headers, body: body)
  }

  @Test func userFoldersArePrivateToTheirOwner() throws {
    try withInProcessRulesService { s in
      let name = "users/alice/notes.txt"
      let path = "/v0/b/app/o/\(enc(name))"
      expectDenied(try s.send(post(name, Array("anon".utf8))), "anonymous create")
      expectDenied(try s.send(post(name, Array("bob".utf8), s.auth("bob"))), "bob create")
      #expect(try s.rowCounts() == ["objects": 0, "files": 0, "blobs": 0])

      let created = try s.send(post(name, Array("hello alice\n".utf8), s.auth("alice")))
      #expect(created.status == 200)
      #expect(created.json?["name"] as? String == name)
      #expect(created.json?["size"] as? String == "12")

      for (label, headers) in [("anonymous", [(String, String)]()), ("bob", s.auth("bob"))] {
        expectDenied(try s.send(.get(path, headers)), "\(label) metadata")
        expectDenied(try s.send(.get(path + "?alt=media", headers)), "\(label) download")
        expectDenied(try s.send(post(name, Array("overwrite".utf8), headers)), "\(label) overwrite")
        expectDenied(
          try s.send(
            .init("PATCH", path, headers: headers, body: Array(#"{"contentType":"text/html"}"#.utf8))),
          "\(label) patch")
        expectDenied(try s.send(.init("DELETE", path, headers: headers)), "\(label) delete")
        expectDenied(try s.send(.get("/v0/b/app/o?prefix=users%2Falice%2F", headers)), "\(label) list")
      }
      // A string prefix reaching into alice's folder is checked as the folder it names ("users").
      expectDenied(try s.send(.get("/v0/b/app/o?prefix=users%2Fal", s.auth("al"))), "prefix users/al by al")
      expectDenied(
        try s.send(.get("/v0/b/app/o?prefix=users%2Falice", s.auth("alice"))), "prefix without slash")
      // A missing object in someone else's folder is 403 too, not 404: no existence oracle.
      expectDenied(try s.send(.get("/v0/b/app/o/users%2Falice%2Fmissing", s.auth("bob"))), "bob missing")
      expectDenied(
        try s.send(
          .init(
            "PATCH", "/v0/b/app/o/users%2Falice%2Fmissing", headers: s.auth("bob"),
            body: Array(#"{"metadata":null}"#.utf8))),
        "bob patch missing")
      expectDenied(
        try s.send(.init("PATCH", path, headers: s.auth("bob"), body: Array(#"{"metadata":null}"#.utf8))),
        "bob patch existing")

      #expect(try s.send(.get(path + "?alt=media", s.auth("alice"))).text == "hello alice\n")
      #expect(try s.send(.get("/v0/b/app/o/users%2Falice%2Fmissing", s.auth("alice"))).status == 404)
      let listing = try s.send(.get("/v0/b/app/o?prefix=users%2Falice%2F", s.auth("alice")))
      #expect(listing.status == 200)
      let items = try #require(listing.json?["items"] as? [[String: Any]])
      #expect(items.compactMap { $0["name"] as? String } == [name])
      #expect(items.allSatisfy { $0["downloadTokens"] == nil })
      #expect(try s.send(.init("DELETE", path, headers: s.auth("alice"))).status == 204)
      #expect(try s.rowCounts()["objects"] == 0)
    }
  }

  @Test func publicFolderIsReadableByAllAndWritableOnlyByItsOwnerUpTo10MiB() throws {
    try withRulesService { s in
      let name = "public/alice/readme.txt"
      let path = "/v0/b/app/o/\(enc(name))"
      expectDenied(try s.send(post(name, Array("x".utf8))), "anonymous create")
      expectDenied(try s.send(post(name, Array("x".utf8), s.auth("bob"))), "bob create in alice's folder")
      expectDenied(
        try s.send(post("public/top.txt", Array("x".utf8), s.auth("alice"))), "file directly in public/")
      #expect(try s.send(post(name, Array("public hello".utf8), s.auth("alice"))).status == 200)

      #expect(try s.send(.get(path + "?alt=media")).text == "public hello")
      let meta = try s.send(.get(path))
      #expect(meta.status == 200)
      #expect(meta.json?["size"] as? String == "12")
      let listing = try s.send(.get("/v0/b/app/o?prefix=public%2F&delimiter=%2F"))
      #expect(listing.status == 200)
      #expect(listing.json?["prefixes"] as? [String] == ["public/alice/"])
      expectDenied(try s.send(.init("DELETE", path)), "anonymous delete")
      expectDenied(try s.send(.init("DELETE", path, headers: s.auth("bob"))), "bob delete")
      expectDenied(try s.send(post(name, Array("mine now".utf8), s.auth("bob"))), "bob overwrite")

      // 10 MiB + 1 declared: refused before the body is read.
      let big = WireRequest(
        "POST", "/v0/b/app/o?name=\(enc("public/alice/big.bin"))", headers: s.auth("alice"), body: [])
      var head = big
      head.addLength = false
      head.headers.append(("Content-Length", String(10 * 1024 * 1024 + 1)))
      expectDenied(try s.sendHeadOnly(head), "11 MiB declared")
      // Exactly 10 MiB is allowed.
      let exact = [UInt8](repeating: 0x61, count: 10 * 1024 * 1024)
      #expect(
        try s.send(post("public/alice/exact.bin", exact, s.auth("alice"))).json?["size"] as? String
          == "10485760")
      #expect(try s.send(.init("DELETE", path, headers: s.auth("alice"))).status == 204)
      #expect(s.tmpEntries() == [])
    }
  }

  @Test func imagesMustBeRealImagesOfAtMost5MiB() throws {
    try withRulesService { s in
      let alice = s.auth("alice")
      let png = try s.send(post("images/alice/dot.png", tinyPNG, alice + [("Content-Type", "image/png")]))
      #expect(png.status == 200)
      #expect(png.json?["contentType"] as? String == "image/png")
      #expect(png.json?["size"] as? String == String(tinyPNG.count))
      let before = try s.rowCounts()
      #expect(before == ["objects": 1, "files": 1, "blobs": 1])

      // Declared image/png, but the bytes are text: the second check, on the sniffed type, refuses it.
      let text = Array("this is plain text, not a picture\n".utf8)
      expectDenied(
        try s.send(post("images/alice/fake.png", text, alice + [("Content-Type", "image/png")])),
        "text posing as png")
      // Overwriting the real image with text is refused the same way.
      expectDenied(
        try s.send(post("images/alice/dot.png", text, alice + [("Content-Type", "image/png")])),
        "overwrite with text")
      // Declared text is refused up front.
      expectDenied(
        try s.send(post("images/alice/t.txt", text, alice + [("Content-Type", "text/plain")])),
        "declared text")
      // PATCHing an image's type to text/html is an update the rules refuse.
      expectDenied(
        try s.send(
          .init(
            "PATCH", "/v0/b/app/o/images%2Falice%2Fdot.png", headers: alice,
            body: Array(#"{"contentType":"text/html"}"#.utf8))),
        "patch to html")
      // bob may view but not write alice's images.
      #expect(
        try s.send(.get("/v0/b/app/o/images%2Falice%2Fdot.png?alt=media", s.auth("bob"))).body == tinyPNG)
      expectDenied(try s.send(.get("/v0/b/app/o/images%2Falice%2Fdot.png?alt=media")), "anonymous view")
      expectDenied(
        try s.send(post("images/alice/b.png", tinyPNG, s.auth("bob") + [("Content-Type", "image/png")])),
        "bob")

      // Over 5 MiB declared: refused before the body.
      var big = post("images/alice/big.png", [], alice + [("Content-Type", "image/png")])
      big.addLength = false
      big.headers.append(("Content-Length", String(5 * 1024 * 1024 + 1)))
      expectDenied(try s.sendHeadOnly(big), "declared 5 MiB + 1")
      // Chunked (no declared size): refused after the body, on the real size.
      let padded = tinyPNG + [UInt8](repeating: 0, count: 5 * 1024 * 1024 + 1 - tinyPNG.count)
      var chunked = post(
        "images/alice/big2.png", [],
        alice + [("Content-Type", "image/png"), ("Transfer-Encoding", "chunked")])
      chunked.addLength = false
      chunked.body =
        Array(String(padded.count, radix: 16).utf8) + [13, 10] + padded + Array("\r\n0\r\n\r\n".utf8)
      expectDenied(try s.send(chunked), "chunked 5 MiB + 1")

      #expect(try s.rowCounts() == before)
      #expect(try s.send(.get("/v0/b/app/o/images%2Falice%2Ffake.png", alice)).status == 404)
      #expect(try s.send(.get("/v0/b/app/o/images%2Falice%2Fbig2.png", alice)).status == 404)
      #expect(try s.send(.get("/v0/b/app/o/images%2Falice%2Fdot.png?alt=media", alice)).body == tinyPNG)
      #expect(s.tmpEntries() == [])
      #expect(s.blobFiles().count == 1)
    }
  }

  @Test func downloadTokenGrantsMediaOfItsObjectOnly() throws {
    try withInProcessRulesService { s in
      let alice = s.auth("alice")
      let a = try s.send(post("users/alice/a.txt", Array("AAA".utf8), alice)).json ?? [:]
      #expect(try s.send(post("users/alice/b.txt", Array("BBB".utf8), alice)).status == 200)
      let token = try #require(a["downloadTokens"] as? String)
      #expect(token.count == 36)
      let aPath = "/v0/b/app/o/users%2Falice%2Fa.txt"
      let bPath = "/v0/b/app/o/users%2Falice%2Fb.txt"

      #expect(try s.send(.get(aPath + "?alt=media&token=\(token)")).text == "AAA")
      #expect(try s.send(.get(aPath + "?alt=media&token=\(token)", s.auth("bob"))).text == "AAA")
      let head = try s.send(.head(aPath + "?alt=media&token=\(token)"))
      #expect(head.status == 200)
      #expect(head["Content-Length"] == "3")
      expectDenied(try s.send(.get(bPath + "?alt=media&token=\(token)")), "other object")
      expectDenied(try s.send(.get(aPath + "?token=\(token)")), "metadata with token")
      expectDenied(try s.send(.get("/v0/b/app/o?prefix=users%2Falice%2F&token=\(token)")), "list with token")
      expectDenied(try s.send(.init("DELETE", aPath + "?token=\(token)")), "delete with token")
      expectDenied(
        try s.send(
          .init(
            "PATCH", aPath + "?alt=media&token=\(token)", body: Array(#"{"rotateDownloadToken":true}"#.utf8))),
        "patch with token")
      expectDenied(
        try s.send(post("users/alice/a.txt", Array("evil".utf8)).withQuery("&token=\(token)")),
        "overwrite with token")

      let rotated = try s.send(
        .init("PATCH", aPath, headers: alice, body: Array(#"{"rotateDownloadToken":true}"#.utf8)))
      #expect(rotated.status == 200)
      let fresh = try #require(rotated.json?["downloadTokens"] as? String)
      #expect(fresh != token)
      expectDenied(try s.send(.get(aPath + "?alt=media&token=\(token)")), "old token after rotation")
      #expect(try s.send(.get(aPath + "?alt=media&token=\(fresh)")).text == "AAA")
      #expect(try s.send(.get(aPath + "?alt=media", alice)).text == "AAA")
    }
  }

  /// `list` without `get`: a listing shows names, never the tokens that would grant the content.
  @Test func listingDoesNotLeakDownloadTokensOrHiddenSubfolders() throws {
    let rules = try temporaryRulesFile(
      """
      rules_version = '2';
      service firebase.storage {
        match /b/{bucket}/o {
          match /shared/{path=**} { allow create; }
          match /shared { allow list; }
          match /shared/{sub} { allow list: if sub != 'hidden'; }
        }
      }
      """)
    defer { try? FileManager.default.removeItem(at: rules) }
    try withInProcessRulesService(rules: rules) { s in
      for name in ["shared/a.txt", "shared/visible/b.txt", "shared/hidden/c.txt"] {
        #expect(try s.send(post(name, Array(name.utf8))).status == 200, "\(name)")
      }
      expectDenied(try s.send(.get("/v0/b/app/o/shared%2Fa.txt")), "get")
      expectDenied(try s.send(.get("/v0/b/app/o/shared%2Fa.txt?alt=media")), "media")

      let flat = try s.send(.get("/v0/b/app/o?prefix=shared%2F"))
      #expect(flat.status == 200)
      let items = try #require(flat.json?["items"] as? [[String: Any]])
      #expect(items.compactMap { $0["name"] as? String } == ["shared/a.txt", "shared/visible/b.txt"])
      // Items are {name, bucket} only, as Firebase lists them: listing grants no metadata.
      #expect(items.allSatisfy { Set($0.keys) == ["name", "bucket"] })
      #expect(!flat.text.contains("downloadTokens"))

      let folders = try s.send(.get("/v0/b/app/o?prefix=shared%2F&delimiter=%2F"))
      #expect(folders.json?["prefixes"] as? [String] == ["shared/hidden/", "shared/visible/"])
      #expect(
        (folders.json?["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["shared/a.txt"]
      )
      expectDenied(try s.send(.get("/v0/b/app/o?prefix=shared%2Fhidden%2F")), "list hidden")
      // A string prefix into the hidden folder is asked as a listing of "shared"; its entries are filtered.
      let sneaky = try s.send(.get("/v0/b/app/o?prefix=shared%2Fhid"))
      #expect(sneaky.status == 200)
      #expect(sneaky.text == #"{"items":[],"prefixes":[]}"#)
      #expect(
        (try s.send(.get("/v0/b/app/o?prefix=shared%2Fvisible%2F")).json?["items"] as? [[String: Any]])?.count
          == 1)
    }
  }

  /// Create/update without `get`: the write's answer carries no download token.
  @Test func writeOnlyCallersGetNoDownloadTokens() throws {
    let rules = try temporaryRulesFile(
      """
      rules_version = '2';
      service firebase.storage {
        match /b/{bucket}/o {
          match /drop/{file} { allow create, update; }
        }
      }
      """)
    defer { try? FileManager.default.removeItem(at: rules) }
    try withInProcessRulesService(rules: rules) { s in
      let up = try s.send(post("drop/report.txt", Array("confidential".utf8)))
      #expect(up.status == 200)
      #expect(up.json?["name"] as? String == "drop/report.txt")
      #expect(up.json?["size"] as? String == "12")
      #expect(up.json?["downloadTokens"] == nil)
      let rotated = try s.send(
        .init("PATCH", "/v0/b/app/o/drop%2Freport.txt", body: Array(#"{"rotateDownloadToken":true}"#.utf8)))
      #expect(rotated.status == 200)
      #expect(rotated.json?["metageneration"] as? String == "2")
      #expect(rotated.json?["downloadTokens"] == nil)
      expectDenied(try s.send(.get("/v0/b/app/o/drop%2Freport.txt")), "get")
      expectDenied(try s.send(.get("/v0/b/app/o/drop%2Freport.txt?alt=media")), "media")
      // The token exists; whoever may read it from the store can still share it.
      let stored = try s.service.larder.objects.get(bucket: "app", name: "drop/report.txt")
      #expect(stored.downloadTokens.count == 1)
      let token = try #require(stored.downloadTokens.first)
      #expect(
        try s.send(.get("/v0/b/app/o/drop%2Freport.txt?alt=media&token=\(token)")).text == "confidential")
      var near = Array(token.utf8)
      near[near.count - 1] = near.last == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
      expectDenied(
        try s.send(
          .get("/v0/b/app/o/drop%2Freport.txt?alt=media&token=\(String(decoding: near, as: UTF8.self))")),
        "near token")
    }
  }

  @Test func activeContentIsAlwaysAnAttachment() throws {
    try withInProcessRulesService { s in
      let alice = s.auth("alice")
      #expect(
        try s.send(post("users/alice/page", Array("<html><script>alert(1)</script></html>".utf8), alice))
          .status == 200)
      let patched = try s.send(
        .init(
          "PATCH", "/v0/b/app/o/users%2Falice%2Fpage", headers: alice,
          body: Array(#"{"contentType":"text/html","contentDisposition":"inline"}"#.utf8)))
      #expect(patched.status == 200)
      let r = try s.send(.get("/v0/b/app/o/users%2Falice%2Fpage?alt=media", alice))
      #expect(r.status == 200)
      #expect(r["Content-Type"] == "text/html")
      #expect(r["Content-Disposition"] == "attachment; filename*=UTF-8''page")
      #expect(r["X-Content-Type-Options"] == "nosniff")
      #expect(r["Content-Security-Policy"] == "default-src 'none'; sandbox")
      // A header injection through metadata is refused by the store.
      let injected = try s.send(
        .init(
          "PATCH", "/v0/b/app/o/users%2Falice%2Fpage", headers: alice,
          body: Array(#"{"cacheControl":"no-store\r\nSet-Cookie: a=b"}"#.utf8)))
      #expect(injected.status == 400)
    }
  }
}

extension WireRequest {
  func withQuery(_ suffix: String) -> WireRequest {
    var r = self
    r.target += suffix
    return r
  }
}
