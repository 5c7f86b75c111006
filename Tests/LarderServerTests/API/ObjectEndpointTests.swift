import Foundation
import LarderHTTP
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Every object endpoint over real HTTP, with exact bytes, hashes and headers.
@Suite struct ObjectEndpointTests {
  static let hello = Array("hello, larder\n".utf8)
  static let helloSHA = "3ebc2a5ec1c62756a7a8c2113e8ae35d34a68462064ce638094b31f07737da16"
  static let helloMD5 = "o8i28nDOM4MISHIfHxfFeg=="

  /// RFC 3339 (with milliseconds) → IMF-fixdate, independently of the server's formatter.
  static func imfDate(fromRFC3339 text: String) -> String? {
    let parser = ISO8601DateFormatter()
    parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    guard let date = parser.date(from: text) else { return nil }
    let f = DateFormatter()
    f.locale = Locale(identifier: "en_US_POSIX")
    f.timeZone = TimeZone(identifier: "GMT")
    f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return f.string(from: date)
  }

  @Test func uploadReturnsFirebaseMetadata() throws {
    try withInProcessService { s in
      let r = try s.send(
        .init(
          "POST", "/v0/b/app/o?name=\(enc("docs/hello.txt"))",
          headers: [("Content-Type", "image/png"), ("X-Goog-Meta-Owner", "ada"), ("x-goog-meta-Project", "larder")],
          body: Self.hello))
      #expect(r.status == 200)
      #expect(r["Content-Type"] == "application/json; charset=utf-8")
      #expect(r["X-Request-Id"]?.isEmpty == false)
      let m = try #require(r.json)
      #expect(m["name"] as? String == "docs/hello.txt")
      #expect(m["bucket"] as? String == "app")
      #expect(m["size"] as? String == "14")
      #expect(m["sha256"] as? String == Self.helloSHA)
      #expect(m["md5Hash"] as? String == Self.helloMD5)
      // contentType is the declared type, as Firebase reports it; the bytes' type is beside it.
      #expect(m["contentType"] as? String == "image/png")
      #expect(m["detectedContentType"] as? String == "text/plain")
      #expect(m["declaredContentType"] == nil)
      #expect(m["contentEncoding"] as? String == "identity")
      #expect(m["contentLanguage"] == nil)
      #expect(m["metadata"] as? [String: String] == ["owner": "ada", "project": "larder"])
      #expect(m["generation"] as? String != nil)
      #expect(m["metageneration"] as? String == "1")
      #expect((m["downloadTokens"] as? String)?.isEmpty == false)
      #expect(sha256Hex(Self.hello) == Self.helloSHA)

      // The metadata GET answers the same document.
      let g = try s.send(.get("/v0/b/app/o/\(enc("docs/hello.txt"))"))
      #expect(g.status == 200)
      let gm = try #require(g.json)
      for key in ["name", "bucket", "generation", "metageneration", "contentType", "detectedContentType", "size", "md5Hash", "sha256", "downloadTokens"] {
        #expect(gm[key] as? String == m[key] as? String, "\(key)")
      }
      #expect(gm["metadata"] as? [String: String] == ["owner": "ada", "project": "larder"])
      #expect(gm["timeCreated"] as? String == m["timeCreated"] as? String)
      #expect(gm["updated"] as? String == m["updated"] as? String)

      // And the bytes come back exactly.
      let d = try s.send(.get("/v0/b/app/o/\(enc("docs/hello.txt"))?alt=media"))
      #expect(d.status == 200)
      #expect(d.body == Self.hello)
    }
  }

  @Test func uploadThroughURLSession() async throws {
    let s = try LiveService()
    defer { s.close() }
    let body = testBytes(300_000, seed: 7)
    var request = URLRequest(url: URL(string: "\(s.base)/v0/b/app/o?name=\(enc("bin/seven.bin"))")!)
    request.httpMethod = "POST"
    request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
    let (data, response) = try await URLSession.shared.upload(for: request, from: Data(body))
    #expect((response as? HTTPURLResponse)?.statusCode == 200)
    let m = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    #expect(m["size"] as? String == "300000")
    #expect(m["sha256"] as? String == sha256Hex(body))
    let (bytes, r2) = try await URLSession.shared.data(from: URL(string: "\(s.base)/v0/b/app/o/\(enc("bin/seven.bin"))?alt=media")!)
    #expect((r2 as? HTTPURLResponse)?.statusCode == 200)
    #expect(Array(bytes) == body)
  }

  @Test func downloadHeaders() throws {
    try withInProcessService { s in
      let m = try s.upload("docs/été notes.txt", Self.hello)
      let r = try s.send(.get("/v0/b/app/o/\(enc("docs/été notes.txt"))?alt=media"))
      #expect(r.status == 200)
      #expect(r.body == Self.hello)
      #expect(r["ETag"] == "\"\(Self.helloSHA)\"")
      #expect(r["Accept-Ranges"] == "bytes")
      // Nothing was declared: served as Firebase serves it, application/octet-stream.
      #expect(r["Content-Type"] == "application/octet-stream")
      #expect(r["Content-Encoding"] == nil)
      #expect(r["Content-Language"] == nil)
      #expect(r["Content-Length"] == "14")
      #expect(r["Content-Disposition"] == "inline; filename*=UTF-8''%C3%A9t%C3%A9%20notes.txt")
      #expect(r["X-Content-Type-Options"] == "nosniff")
      #expect(r["Cache-Control"] == "private, max-age=0")
      #expect(r["Last-Modified"] == Self.imfDate(fromRFC3339: m["timeCreated"] as! String))
      #expect(r["Content-Range"] == nil)

      // HEAD: the same headers, no body, Content-Length = size.
      let h = try s.send(.head("/v0/b/app/o/\(enc("docs/été notes.txt"))?alt=media"))
      #expect(h.status == 200)
      #expect(h.body.isEmpty)
      #expect(h["Content-Length"] == "14")
      for name in ["ETag", "Last-Modified", "Accept-Ranges", "Content-Type", "Content-Disposition", "X-Content-Type-Options", "Cache-Control"] {
        #expect(h[name] == r[name], "\(name)")
      }
    }
  }

  @Test func activeContentIsAnAttachment() throws {
    try withInProcessService { s in
      let html = Array("<!DOCTYPE html>\n<html><head><title>x</title></head><body><script>alert(1)</script></body></html>\n".utf8)
      let svg = Array("<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"></svg>\n".utf8)
      try s.upload("page.txt", html, headers: [("Content-Type", "text/plain")])
      try s.upload("pic.svg", svg)
      try s.upload("app.js", Array("function f() { return 1; }\n".utf8), headers: [("Content-Type", "application/javascript")])
      let page = try s.send(.get("/v0/b/app/o/page.txt?alt=media"))
      // Served with its declared type, but the detected HTML makes it an attachment.
      #expect(page["Content-Type"] == "text/plain")
      #expect(page["Content-Security-Policy"] == "default-src 'none'; sandbox")
      #expect(page["Content-Disposition"] == "attachment; filename*=UTF-8''page.txt")
      #expect(page["X-Content-Type-Options"] == "nosniff")
      #expect(page.body == html)
      let pic = try s.send(.get("/v0/b/app/o/pic.svg?alt=media"))
      #expect(pic["Content-Type"] == "application/octet-stream")
      #expect(pic["X-Content-Type-Options"] == "nosniff")
      #expect(pic["Content-Disposition"] == "attachment; filename*=UTF-8''pic.svg")
      // A declared JavaScript type is served as declared, and so never inline.
      let js = try s.send(.get("/v0/b/app/o/app.js?alt=media"))
      #expect(js.status == 200)
      #expect(js["X-Content-Type-Options"] == "nosniff")
      #expect(js["Content-Type"] == "application/javascript")
      #expect(js["Content-Disposition"] == "attachment; filename*=UTF-8''app.js")
      #expect(js["Content-Security-Policy"] == "default-src 'none'; sandbox")
    }
  }

  @Test func headOfMetadataHasLengthAndNoBody() throws {
    try withInProcessService { s in
      try s.upload("a", Self.hello)
      let g = try s.send(.get("/v0/b/app/o/a"))
      let h = try s.send(.head("/v0/b/app/o/a"))
      #expect(h.status == 200)
      #expect(h.body.isEmpty)
      #expect(h["Content-Length"] == String(g.body.count))
    }
  }

  @Test func patchUpdatesMetadata() throws {
    try withInProcessService { s in
      try s.upload("p.txt", Self.hello, headers: [("X-Goog-Meta-Keep", "1"), ("X-Goog-Meta-Drop", "2")])
      let before = try #require(try s.send(.get("/v0/b/app/o/p.txt")).json)
      let patch = """
        {"contentType": "text/markdown", "cacheControl": "public, max-age=60", "contentDisposition": "inline; filename=\\"x.md\\"",
         "metadata": {"drop": null, "new": "v"}, "rotateDownloadToken": true}
        """
      let r = try s.send(.init("PATCH", "/v0/b/app/o/p.txt", headers: [("Content-Type", "application/json")], body: Array(patch.utf8)))
      #expect(r.status == 200)
      let m = try #require(r.json)
      #expect(m["contentType"] as? String == "text/markdown")
      #expect(m["cacheControl"] as? String == "public, max-age=60")
      #expect(m["contentDisposition"] as? String == "inline; filename=\"x.md\"")
      #expect(m["metadata"] as? [String: String] == ["keep": "1", "new": "v"])
      #expect(m["metageneration"] as? String == "2")
      #expect(m["generation"] as? String == before["generation"] as? String)
      #expect(m["sha256"] as? String == Self.helloSHA)
      let oldToken = try #require(before["downloadTokens"] as? String)
      let newToken = try #require(m["downloadTokens"] as? String)
      #expect(newToken != oldToken && !newToken.isEmpty)

      let d = try s.send(.get("/v0/b/app/o/p.txt?alt=media"))
      #expect(d["Content-Type"] == "text/markdown")
      #expect(d["Cache-Control"] == "public, max-age=60")
      #expect(d["Content-Disposition"] == "inline; filename=\"x.md\"")
      #expect(d.body == Self.hello)

      // Clearing fields with null; removing all metadata.
      let r2 = try s.send(.init("PATCH", "/v0/b/app/o/p.txt", body: Array(#"{"cacheControl": null, "metadata": null}"#.utf8)))
      #expect(r2.status == 200)
      let m2 = try #require(r2.json)
      #expect(m2["cacheControl"] == nil)
      #expect(m2["metadata"] == nil)
      #expect(m2["metageneration"] as? String == "3")

      // Malformed input changes nothing. (A read-only field such as `size` is ignored, and
      // `contentType: null` resets the type: see FirebaseMetadataTests.)
      for body in ["{not json", "[1,2]", #"{"sizes": "1"}"#, #"{"contentType": 5}"#, #"{"metadata": {"k": 1}}"#, #"{"rotateDownloadToken": "yes"}"#, #"{"contentType": "nonsense"}"#, #"{"contentEncoding": 1}"#, #"{"contentLanguage": "en\u0000"}"#] {
        let bad = try s.send(.init("PATCH", "/v0/b/app/o/p.txt", body: Array(body.utf8)))
        #expect(bad.status == 400, "\(body)")
        #expect(bad.error?["code"] as? Int == 400)
        #expect(bad.error?["status"] as? String == "INVALID_ARGUMENT")
      }
      let after = try #require(try s.send(.get("/v0/b/app/o/p.txt")).json)
      #expect(after["metageneration"] as? String == "3")
      // PATCH of a missing object.
      let missing = try s.send(.init("PATCH", "/v0/b/app/o/nope", body: Array(#"{"cacheControl": "x"}"#.utf8)))
      #expect(missing.status == 404)
    }
  }

  @Test func deleteThenNotFound() throws {
    try withInProcessService { s in
      try s.upload("gone", Self.hello)
      let d = try s.send(.init("DELETE", "/v0/b/app/o/gone"))
      #expect(d.status == 204)
      #expect(d.body.isEmpty)
      for target in ["/v0/b/app/o/gone", "/v0/b/app/o/gone?alt=media"] {
        let r = try s.send(.get(target))
        #expect(r.status == 404)
        #expect(r.error?["code"] as? Int == 404)
        #expect(r.error?["status"] as? String == "NOT_FOUND")
      }
      let again = try s.send(.init("DELETE", "/v0/b/app/o/gone"))
      #expect(again.status == 404)
    }
  }

  @Test func listWithPrefixDelimiterAndPages() throws {
    try withInProcessService { s in
      var names: [String] = []
      for i in 0..<23 { names.append("photos/\(String(format: "%02d", i)).jpg") }
      names += ["photos/2024/a.jpg", "photos/2024/b.jpg", "photos/2025/c.jpg", "docs/x.txt", "top.txt"]
      for (i, n) in names.enumerated() { try s.upload(n, Array("content \(i)".utf8)) }

      let folder = try #require(try s.send(.get("/v0/b/app/o?prefix=photos%2F&delimiter=%2F")).json)
      #expect(folder["prefixes"] as? [String] == ["photos/2024/", "photos/2025/"])
      let items = try #require(folder["items"] as? [[String: Any]])
      #expect(items.compactMap { $0["name"] as? String } == names.prefix(23).sorted())
      #expect(folder["nextPageToken"] == nil)

      let root = try #require(try s.send(.get("/v0/b/app/o?delimiter=%2F")).json)
      #expect(root["prefixes"] as? [String] == ["docs/", "photos/"])
      #expect((root["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["top.txt"])

      // Pages of 5 cover every item exactly once, in a stable order.
      var seen: [String] = []
      var token: String?
      var pages = 0
      repeat {
        var target = "/v0/b/app/o?maxResults=5"
        if let token { target += "&pageToken=\(enc(token))" }
        let page = try #require(try s.send(.get(target)).json)
        let got = (page["items"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(got.count <= 5)
        seen += got
        token = page["nextPageToken"] as? String
        pages += 1
      } while token != nil && pages < 20
      #expect(seen == names.sorted())
      #expect(pages == 6)

      let again = try #require(try s.send(.get("/v0/b/app/o?maxResults=5")).json)
      let first = try #require(try s.send(.get("/v0/b/app/o?maxResults=5")).json)
      #expect((again["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == Array(names.sorted().prefix(5)))
      #expect(again["nextPageToken"] as? String == first["nextPageToken"] as? String)

      // Tokens are signed: one that merely decodes, or another listing's, is refused.
      #expect(try s.send(.get("/v0/b/app/o?pageToken=AAAA")).status == 400)
      let issued = try #require(first["nextPageToken"] as? String)
      #expect(try s.send(.get("/v0/b/app/o?maxResults=5&prefix=a&pageToken=\(enc(issued))")).status == 400)
      for forged in ["garbage!", enc("{\"after\":\"x\"}"), String(repeating: "*", count: 5000)] {
        let r = try s.send(.get("/v0/b/app/o?pageToken=\(forged)"))
        #expect(r.status == 400, "\(forged.prefix(20))")
        #expect(r.error?["code"] as? Int == 400)
      }
      for bad in ["-1", "abc", "1e3"] {
        #expect(try s.send(.get("/v0/b/app/o?maxResults=\(bad)")).status == 400)
      }
      // Another bucket is empty.
      let other = try #require(try s.send(.get("/v0/b/other/o")).json)
      #expect((other["items"] as? [Any])?.count == 0)
      #expect((other["prefixes"] as? [Any])?.count == 0)
    }
  }

  @Test func healthAndMetrics() throws {
    try withService { s in
      let h = try s.send(.get("/healthz"))
      #expect(h.status == 200)
      #expect(h.json?["status"] as? String == "ok")
      try s.upload("m", Self.hello)
      _ = try s.send(.get("/v0/b/app/o/m"))
      _ = try s.send(.get("/v0/b/app/o/m?alt=media"))
      _ = try s.send(.get("/v0/b/app/o/missing"))
      _ = try s.send(.get("/v0/b/app/o"))
      // Requests are counted when they complete, which may trail the client's read.
      var m = try s.send(.get("/metrics"))
      _ = pollUntil {
        m = (try? s.send(.get("/metrics"))) ?? m
        return m.text.contains(#"larder_http_requests_total{route="objects.list",status="200"} 1"#)
      }
      #expect(m.status == 200)
      #expect(m["Content-Type"]?.hasPrefix("text/plain") == true)
      let text = m.text
      for line in [
        #"larder_http_requests_total{route="healthz",status="200"} 1"#,
        #"larder_http_requests_total{route="objects.upload",status="200"} 1"#,
        #"larder_http_requests_total{route="objects.get",status="200"} 1"#,
        #"larder_http_requests_total{route="objects.get",status="404"} 1"#,
        #"larder_http_requests_total{route="objects.download",status="200"} 1"#,
        #"larder_http_requests_total{route="objects.list",status="200"} 1"#,
        #"larder_http_request_body_bytes_total{route="objects.upload"} 14"#,
        #"larder_http_response_body_bytes_total{route="objects.download"} 14"#,
      ] {
        #expect(text.contains(line + "\n"), "\(line)")
      }
      #expect(text.contains("larder_http_request_duration_seconds_count{route=\"objects.upload\"} 1\n"))
      #expect(text.contains("\nlarder_objects 1\n"))
      #expect(text.contains("\nlarder_blob_bytes 14\n"))
    }
  }
}
