import Foundation
import Larder
import LarderServer
import Testing

/// Object metadata as Firebase reports it: the declared `contentType` beside Larder's
/// `detectedContentType`, every writable field through PATCH, `contentEncoding`/`contentLanguage`
/// end to end, listings of `{name, bucket}`, and the download headers that keep it safe.
@Suite struct FirebaseMetadataTests {
  static let text = Array("plain words, nothing more\n".utf8)
  static let html = Array(
    "<!DOCTYPE html>\n<html><head><title>x</title></head><body><script>alert(1)</script></body></html>\n".utf8)

  func patch(_ s: some ServiceHarness, _ name: String, _ json: String) throws -> WireResponse {
    try s.send(.init("PATCH", "/v0/b/app/o/\(enc(name))", headers: [("Content-Type", "application/json")], body: Array(json.utf8)))
  }

  func counts(_ s: some ServiceHarness) throws -> [String: Int] {
    try s.service.larder.catalog.read { db in
      var out: [String: Int] = [:]
      for table in ["objects", "files", "blobs"] {
        out[table] = Int(try db.row("SELECT count(*) AS n FROM \(table)")?.int("n") ?? -1)
      }
      return out
    }
  }

  @Test func contentEncodingAndLanguageAreStoredReturnedAndSentOnDownload() throws {
    try withInProcessService { s in
      // Headers, as the REST API documents them.
      let byHeader = try s.upload(
        "h.txt", Self.text,
        headers: [
          ("Content-Type", "text/plain; charset=utf-8"), ("X-Goog-Content-Encoding", "gzip"),
          ("X-Goog-Content-Language", "fr-CA"), ("X-Goog-Cache-Control", "public, max-age=30"),
          ("X-Goog-Content-Disposition", "inline; filename=\"h.txt\""),
        ])
      #expect(byHeader["contentType"] as? String == "text/plain; charset=utf-8")
      #expect(byHeader["detectedContentType"] as? String == "text/plain")
      #expect(byHeader["contentEncoding"] as? String == "gzip")
      #expect(byHeader["contentLanguage"] as? String == "fr-CA")
      #expect(byHeader["cacheControl"] as? String == "public, max-age=30")
      #expect(byHeader["contentDisposition"] as? String == "inline; filename=\"h.txt\"")
      let d = try s.send(.get("/v0/b/app/o/h.txt?alt=media"))
      #expect(d.status == 200)
      #expect(d.body == Self.text)  // stored and served as sent: the client decodes
      #expect(d["Content-Type"] == "text/plain; charset=utf-8")
      #expect(d["Content-Encoding"] == "gzip")
      #expect(d["Content-Language"] == "fr-CA")
      #expect(d["Cache-Control"] == "public, max-age=30")
      #expect(d["Content-Disposition"] == "inline; filename=\"h.txt\"")
      #expect(d["X-Content-Type-Options"] == "nosniff")
      let h = try s.send(.head("/v0/b/app/o/h.txt?alt=media"))
      #expect(h["Content-Encoding"] == "gzip")
      #expect(h["Content-Language"] == "fr-CA")

      // Query parameters, as for cacheControl.
      let byQuery = try s.send(
        .init("POST", "/v0/b/app/o?name=q.txt&contentEncoding=br&contentLanguage=de", body: Self.text))
      #expect(byQuery.status == 200)
      #expect(byQuery.json?["contentEncoding"] as? String == "br")
      #expect(byQuery.json?["contentLanguage"] as? String == "de")
      // The metadata GET answers the same.
      let g = try #require(try s.send(.get("/v0/b/app/o/q.txt")).json)
      #expect(g["contentEncoding"] as? String == "br")
      #expect(g["contentLanguage"] as? String == "de")

      // Unset: Firebase's "identity", no headers on download.
      let plain = try s.upload("p.txt", Self.text)
      #expect(plain["contentEncoding"] as? String == "identity")
      #expect(plain["contentLanguage"] == nil)
      let pd = try s.send(.get("/v0/b/app/o/p.txt?alt=media"))
      #expect(pd["Content-Encoding"] == nil)
      #expect(pd["Content-Language"] == nil)
    }
  }

  @Test func headerFieldsWithControlCharactersAreRefusedOnCreate() throws {
    try withInProcessService { s in
      for (parameter, value) in [
        ("cacheControl", "max-age=1\r\nSet-Cookie: a=b"), ("contentDisposition", "inline\nX-Evil: 1"),
        ("contentEncoding", "gzip\r\n"), ("contentLanguage", "en\u{1}"), ("cacheControl", "no\u{7f}"),
        ("contentLanguage", String(repeating: "a", count: 1025)),
      ] {
        let r = try s.send(.init("POST", "/v0/b/app/o?name=bad.txt&\(parameter)=\(enc(value))", body: Self.text))
        #expect(r.status == 400, "\(parameter)")
        #expect(r.error?["status"] as? String == "INVALID_ARGUMENT", "\(parameter)")
        #expect(
          r.error?["message"] as? String == "\(parameter) must be printable and at most 1024 bytes", "\(parameter)")
      }
      // A control character a header can carry (here a tab inside the value) is refused the same way.
      let tab = try s.send(
        .init("POST", "/v0/b/app/o?name=bad.txt", headers: [("X-Goog-Content-Language", "en\tfr")], body: Self.text))
      #expect(tab.status == 400)
      #expect(tab.error?["message"] as? String == "contentLanguage must be printable and at most 1024 bytes")
      #expect(try counts(s) == ["objects": 0, "files": 0, "blobs": 0])
      #expect(s.tmpEntries() == [])
      #expect(try s.send(.get("/v0/b/app/o/bad.txt")).status == 404)
    }
  }

  @Test func patchAcceptsEveryWritableFieldAndNullResetsIt() throws {
    try withInProcessService { s in
      try s.upload("f.txt", Self.text, headers: [("Content-Type", "text/plain"), ("X-Goog-Meta-Keep", "1")])
      let set = try patch(
        s, "f.txt",
        """
        {"contentType": "text/markdown", "cacheControl": "no-store", "contentDisposition": "inline",
         "contentEncoding": "gzip", "contentLanguage": "en-GB", "metadata": {"Mixed": "Case", "keep": null}}
        """)
      #expect(set.status == 200, "\(set.text)")
      let m = try #require(set.json)
      #expect(m["contentType"] as? String == "text/markdown")
      #expect(m["detectedContentType"] as? String == "text/plain")
      #expect(m["cacheControl"] as? String == "no-store")
      #expect(m["contentDisposition"] as? String == "inline")
      #expect(m["contentEncoding"] as? String == "gzip")
      #expect(m["contentLanguage"] as? String == "en-GB")
      #expect(m["metadata"] as? [String: String] == ["Mixed": "Case"])
      #expect(m["metageneration"] as? String == "2")
      let d = try s.send(.get("/v0/b/app/o/f.txt?alt=media"))
      #expect(d["Content-Type"] == "text/markdown")
      #expect(d["Content-Encoding"] == "gzip")
      #expect(d["Content-Language"] == "en-GB")
      #expect(d["Cache-Control"] == "no-store")
      #expect(d["Content-Disposition"] == "inline")

      // null resets each one; contentType to application/octet-stream, as Firebase does.
      let reset = try patch(
        s, "f.txt",
        """
        {"contentType": null, "cacheControl": null, "contentDisposition": null, "contentEncoding": null,
         "contentLanguage": null, "metadata": null}
        """)
      #expect(reset.status == 200, "\(reset.text)")
      let r = try #require(reset.json)
      #expect(r["contentType"] as? String == "application/octet-stream")
      #expect(r["detectedContentType"] as? String == "text/plain")
      #expect(r["cacheControl"] == nil)
      #expect(r["contentDisposition"] == nil)
      #expect(r["contentEncoding"] as? String == "identity")
      #expect(r["contentLanguage"] == nil)
      #expect(r["metadata"] == nil)
      #expect(r["metageneration"] as? String == "3")
      let d2 = try s.send(.get("/v0/b/app/o/f.txt?alt=media"))
      #expect(d2["Content-Type"] == "application/octet-stream")
      #expect(d2["Content-Encoding"] == nil)
      #expect(d2["Content-Language"] == nil)
      #expect(d2["Cache-Control"] == "private, max-age=0")
      #expect(d2["Content-Disposition"] == "inline; filename*=UTF-8''f.txt")
      #expect(d2.body == Self.text)
    }
  }

  @Test func patchIgnoresReadOnlyFieldsSentBackFromGetMetadata() throws {
    try withInProcessService { s in
      try s.upload("r.txt", Self.text, headers: [("Content-Type", "text/plain")])
      let before = try #require(try s.send(.get("/v0/b/app/o/r.txt")).json)
      // The whole resource back, with one writable change and the read-only fields altered:
      // the read-only ones are ignored, whatever they say.
      var echo = before
      echo["contentLanguage"] = "nl"
      echo["size"] = "1"
      echo["md5Hash"] = "AAAAAAAAAAAAAAAAAAAAAA=="
      echo["generation"] = "7"
      echo["name"] = "elsewhere.txt"
      echo["fullPath"] = "elsewhere.txt"
      echo["detectedContentType"] = "image/png"
      echo["sha256"] = String(repeating: "0", count: 64)
      echo["downloadTokens"] = "forged"
      let body = try JSONSerialization.data(withJSONObject: echo)
      let r = try s.send(.init("PATCH", "/v0/b/app/o/r.txt", body: Array(body)))
      #expect(r.status == 200, "\(r.text)")
      let m = try #require(r.json)
      #expect(m["contentLanguage"] as? String == "nl")
      for key in ["name", "bucket", "size", "md5Hash", "sha256", "generation", "contentType", "detectedContentType", "timeCreated", "downloadTokens"] {
        #expect(m[key] as? String == before[key] as? String, "\(key)")
      }
      #expect(m["metageneration"] as? String == "2")
      #expect(try s.send(.get("/v0/b/app/o/elsewhere.txt")).status == 404)

      // A field that is neither writable nor read-only is a mistake worth reporting.
      let unknown = try patch(s, "r.txt", #"{"contentLanguge": "nl"}"#)
      #expect(unknown.status == 400)
      #expect(unknown.error?["message"] as? String == "field 'contentLanguge' cannot be changed")
      #expect(try s.send(.get("/v0/b/app/o/r.txt")).json?["metageneration"] as? String == "2")
    }
  }

  @Test func downloadsAreAttachmentsWhenEitherTypeIsActive() throws {
    try withInProcessService { s in
      // Declared harmless, detected HTML; declared HTML, detected text; both harmless.
      try s.upload("a.png", Self.html, headers: [("Content-Type", "image/png")])
      try s.upload("b.html", Self.text, headers: [("Content-Type", "text/html")])
      try s.upload(
        "c.txt", Self.text,
        headers: [("Content-Type", "text/plain"), ("X-Goog-Content-Disposition", "inline; filename=\"c.txt\"")])
      try s.upload(
        "d.html", Self.html,
        headers: [("Content-Type", "text/html"), ("X-Goog-Content-Disposition", "inline; filename=\"d.html\"")])
      let expected: [(String, String, String)] = [
        ("a.png", "image/png", "attachment; filename*=UTF-8''a.png"),
        ("b.html", "text/html", "attachment; filename*=UTF-8''b.html"),
        ("c.txt", "text/plain", "inline; filename=\"c.txt\""),
        // A custom disposition never makes active content inline.
        ("d.html", "text/html", "attachment; filename*=UTF-8''d.html"),
      ]
      for (name, type, disposition) in expected {
        for method in ["GET", "HEAD"] {
          let r = try s.send(.init(method, "/v0/b/app/o/\(enc(name))?alt=media"))
          #expect(r.status == 200, "\(method) \(name)")
          #expect(r["Content-Type"] == type, "\(method) \(name)")
          #expect(r["Content-Disposition"] == disposition, "\(method) \(name)")
          #expect(r["X-Content-Type-Options"] == "nosniff", "\(method) \(name)")
          #expect(r["Content-Security-Policy"] == "default-src 'none'; sandbox", "\(method) \(name)")
        }
      }
      // PATCHing the declared type to HTML makes a text object an attachment too.
      #expect(try patch(s, "c.txt", #"{"contentType": "text/html"}"#).status == 200)
      let c = try s.send(.get("/v0/b/app/o/c.txt?alt=media"))
      #expect(c["Content-Type"] == "text/html")
      #expect(c["Content-Disposition"] == "attachment; filename*=UTF-8''c.txt")
    }
  }

  @Test func listingItemsAreNameAndBucketOnly() throws {
    try withInProcessService { s in
      try s.upload("l/a.txt", Self.text, headers: [("Content-Type", "text/plain"), ("X-Goog-Meta-K", "v")])
      try s.upload("l/b.txt", Self.text)
      let r = try s.send(.get("/v0/b/app/o?prefix=l%2F"))
      #expect(r.status == 200)
      let json = try #require(r.json)
      let items = try #require(json["items"] as? [[String: Any]])
      #expect(items.count == 2)
      for (item, name) in zip(items, ["l/a.txt", "l/b.txt"]) {
        #expect(Set(item.keys) == ["name", "bucket"])
        #expect(item["name"] as? String == name)
        #expect(item["bucket"] as? String == "app")
      }
      #expect(json["prefixes"] as? [String] == [])
      #expect(json["nextPageToken"] == nil)
    }
  }

  @Test func rulesSeeTheDeclaredAndTheDetectedType() throws {
    // Before the body the detected type is unknown, so the create rule is not decided there;
    // the second check, on the real bytes, sees what libmagic found. An update's `resource`
    // carries the stored object's detected type while its declared type changes.
    let file = try temporaryRulesFile(
      """
      rules_version = '2';
      service firebase.storage {
        match /b/{bucket}/o {
          match /{name} {
            allow get;
            allow create: if request.resource.contentType == 'text/plain'
              && request.resource.detectedContentType == 'text/plain';
            allow update: if resource.detectedContentType == 'text/plain'
              && request.resource.detectedContentType == 'text/plain'
              && request.resource.contentType == 'text/markdown';
          }
        }
      }
      """)
    defer { try? FileManager.default.removeItem(at: file) }
    try withInProcessRulesService(rules: file) { s in
      func post(_ name: String, _ body: [UInt8], _ type: String) throws -> WireResponse {
        try s.send(.init("POST", "/v0/b/app/o?name=\(enc(name))", headers: [("Content-Type", type)], body: body))
      }
      let ok = try post("n", Self.text, "text/plain")
      #expect(ok.status == 200, "\(ok.text)")
      #expect(ok.json?["contentType"] as? String == "text/plain")
      #expect(ok.json?["detectedContentType"] as? String == "text/plain")
      // Declared right, content HTML: the second check (on the real bytes) refuses it.
      let html = try post("h", Self.html, "text/plain")
      #expect(html.status == 403)
      #expect(html.error?["status"] as? String == "PERMISSION_DENIED")
      // Content right, declared wrong: refused before the body.
      #expect(try post("t", Self.text, "application/x-notes").status == 403)
      #expect(try counts(s) == ["objects": 1, "files": 1, "blobs": 1])
      // A PATCH keeps the detected type; only the declared one changes.
      let md = try patch(s, "n", #"{"contentType": "text/markdown"}"#)
      #expect(md.status == 200)
      #expect(md.json?["contentType"] as? String == "text/markdown")
      #expect(md.json?["detectedContentType"] as? String == "text/plain")
      #expect(try patch(s, "n", #"{"contentType": "text/html"}"#).status == 403)
      #expect(try s.send(.get("/v0/b/app/o/n")).json?["contentType"] as? String == "text/markdown")
    }
  }
}
