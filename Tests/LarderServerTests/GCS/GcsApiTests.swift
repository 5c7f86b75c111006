import Foundation
import Larder
import LarderCrypto
import LarderServer
import Testing

/// The GCS JSON API against a live server on 127.0.0.1:0: protocol details the Google clients
/// rely on, field by field, and the same objects through the Firebase REST API.
@Suite struct GcsApiTests {
  static let oddName = "dir/with space/ünïcödé #?&=+%.txt"

  static func crc32c(_ bytes: [UInt8]) -> String {
    var crc = CRC32C()
    crc.update(bytes)
    return crc.base64
  }

  static func md5(_ bytes: [UInt8]) -> String { Data(Digest.hash(.md5, bytes)).base64EncodedString() }

  static func media(_ name: String, _ body: [UInt8], query: String = "", type: String = "text/plain")
    -> WireRequest
  {
    WireRequest(
      "POST", "/upload/storage/v1/b/app/o?uploadType=media&name=\(enc(name))\(query)",
      headers: [("Content-Type", type)], body: body)
  }

  static func multipartBody(_ json: String, _ content: [UInt8], boundary: String = "==b0undary==") -> [UInt8]
  {
    Array(
      "--\(boundary)\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n\(json)\r\n--\(boundary)\r\nContent-Type: text/plain\r\n\r\n"
        .utf8)
      + content + Array("\r\n--\(boundary)--\r\n".utf8)
  }

  static func multipart(_ json: String, _ content: [UInt8], query: String = "") -> WireRequest {
    WireRequest(
      "POST", "/upload/storage/v1/b/app/o?uploadType=multipart\(query)",
      headers: [("Content-Type", "multipart/related; boundary=\"==b0undary==\"")],
      body: multipartBody(json, content))
  }

  static func item(_ name: String, bucket: String = "app") -> String {
    "/storage/v1/b/\(bucket)/o/\(enc(name))"
  }

  @Test func aMediaUploadIsTheSameObjectThroughBothAPIs() throws {
    try withService { s in
      let content = Array("The quick brown fox jumps over the lazy dog".utf8)
      let r = try s.send(Self.media(Self.oddName, content))
      #expect(r.status == 200, "\(r.text)")
      let json = try #require(r.json)
      let generation = try #require(json["generation"] as? String)
      #expect(json["kind"] as? String == "storage#object")
      #expect(json["id"] as? String == "app/\(Self.oddName)/\(generation)")
      #expect(json["name"] as? String == Self.oddName)
      #expect(json["bucket"] as? String == "app")
      #expect(json["metageneration"] as? String == "1")
      #expect(json["size"] as? String == "43")
      #expect(json["contentType"] as? String == "text/plain")
      #expect(json["md5Hash"] as? String == Self.md5(content))
      #expect(json["crc32c"] as? String == "ImIEBA==")  // 0x22620404, big-endian
      #expect(json["storageClass"] as? String == "STANDARD")
      #expect(json["selfLink"] as? String == "http://127.0.0.1/storage/v1/b/app/o/\(enc(Self.oddName))")
      #expect(
        json["mediaLink"] as? String
          == "http://127.0.0.1/download/storage/v1/b/app/o/\(enc(Self.oddName))?generation=\(generation)&alt=media"
      )
      #expect((json["timeCreated"] as? String)?.hasSuffix("Z") == true)
      #expect(json["etag"] as? String != nil)

      let get = try s.send(.get(Self.item(Self.oddName)))
      #expect(get.status == 200)
      let head = try s.send(.head(Self.item(Self.oddName)))
      #expect(head.status == 200)
      #expect(head.body.isEmpty)
      #expect(head["Content-Length"] == String(get.body.count))
      #expect(get.json?["generation"] as? String == generation)
      #expect(get.json?["crc32c"] as? String == "ImIEBA==")

      for path in [
        Self.item(Self.oddName) + "?alt=media", "/download" + Self.item(Self.oddName) + "?alt=media",
      ] {
        let d = try s.send(.get(path))
        #expect(d.status == 200)
        #expect(d.body == content)
        #expect(d["X-Goog-Hash"] == "crc32c=ImIEBA==,md5=\(Self.md5(content))")
        #expect(d["X-Goog-Generation"] == generation)
        #expect(d["X-Content-Type-Options"] == "nosniff")
        #expect(d["Content-Security-Policy"] == "default-src 'none'; sandbox")
      }
      let ranged = try s.send(
        .get("/download" + Self.item(Self.oddName) + "?alt=media", [("Range", "bytes=4-8")]))
      #expect(ranged.status == 206)
      #expect(ranged.body == Array("quick".utf8))
      #expect(ranged["Content-Range"] == "bytes 4-8/43")
      // An old generation is not there (Larder keeps the live one only).
      #expect(try s.send(.get(Self.item(Self.oddName) + "?alt=media&generation=1")).status == 404)

      // The Firebase REST API: the same object, generation and bytes.
      let fb = try s.send(.get("/v0/b/app/o/\(enc(Self.oddName))"))
      #expect(fb.json?["generation"] as? String == generation)
      #expect(try s.send(.get("/v0/b/app/o/\(enc(Self.oddName))?alt=media")).body == content)
      // And an object the Firebase API wrote, through GCS's.
      let written = try s.upload("fb/written.bin", [1, 2, 3, 4])
      let seen = try s.send(.get(Self.item("fb/written.bin")))
      #expect(seen.json?["generation"] as? String == written["generation"] as? String)
      #expect(seen.json?["crc32c"] as? String == Self.crc32c([1, 2, 3, 4]))
    }
  }

  @Test func multipartTakesTheJSONResourceFirstAndMalformedBodiesStoreNothing() throws {
    try withService { s in
      let content = Array("multipart content\n".utf8)
      let r = try s.send(
        Self.multipart(
          #"{"name": "m/one.txt", "metadata": {"k": "v"}, "cacheControl": "no-store", "contentType": "text/markdown"}"#,
          content))
      #expect(r.status == 200, "\(r.text)")
      #expect(r.json?["name"] as? String == "m/one.txt")
      #expect(r.json?["contentType"] as? String == "text/markdown")
      #expect(r.json?["metadata"] as? [String: String] == ["k": "v"])
      #expect(r.json?["cacheControl"] as? String == "no-store")
      #expect(r.json?["crc32c"] as? String == Self.crc32c(content))
      #expect(try s.send(.get(Self.item("m/one.txt") + "?alt=media")).body == content)

      // A crc32c in the resource (google-cloud-storage sends one) is checked before anything is stored.
      let checked = try s.send(
        Self.multipart(#"{"name": "m/two.txt", "crc32c": "\#(Self.crc32c(content))"}"#, content))
      #expect(checked.status == 200, "\(checked.text)")
      let before = try s.rowCounts()
      let wrong = try s.send(Self.multipart(#"{"name": "m/bad.txt", "crc32c": "AAAAAA=="}"#, content))
      #expect(wrong.status == 400, "\(wrong.text)")
      #expect((wrong.error?["message"] as? String)?.contains("crc32c") == true)
      let good = Self.multipartBody(#"{"name": "m/bad.txt"}"#, content)
      let malformed: [(String, [UInt8])] = [
        ("multipart/related; boundary=\"==b0undary==\"", Array(good.dropLast(8))),  // no closing delimiter
        ("multipart/related; boundary=\"==b0undary==\"", Array("junk".utf8) + good),  // a preamble
        ("multipart/related; boundary=\"==b0undary==\"", Self.multipartBody("not json", content)),
        ("multipart/related", good),  // no boundary
        ("application/json", good),
        (
          "multipart/related; boundary=\"==b0undary==\"",
          Self.multipartBody(#"{"name": "m/bad.txt", "crc32c": "xyz"}"#, content)
        ),
      ]
      for (type, body) in malformed {
        let bad = try s.send(
          WireRequest(
            "POST", "/upload/storage/v1/b/app/o?uploadType=multipart", headers: [("Content-Type", type)],
            body: body))
        #expect(bad.status == 400, "\(type): \(bad.status) \(bad.text)")
        let errors = bad.error?["errors"] as? [[String: Any]]
        #expect(errors?.first?["reason"] as? String == "invalid")
        #expect(errors?.first?["domain"] as? String == "global")
      }
      #expect(try s.rowCounts() == before)
      #expect(try s.send(.get(Self.item("m/bad.txt"))).status == 404)
      #expect(s.tmpEntries() == [])
    }
  }

  @Test func unknownOrMissingUploadTypeIsA400ThatStoresNothing() throws {
    try withService { s in
      for query in ["uploadType=bogus&name=x", "name=x", "uploadType=media"] {
        let r = try s.send(WireRequest("POST", "/upload/storage/v1/b/app/o?\(query)", body: [1, 2, 3]))
        #expect(r.status == 400, "\(query): \(r.text)")
        #expect(r.error?["code"] as? Int == 400)
        #expect((r.error?["errors"] as? [[String: Any]])?.first?["reason"] as? String == "invalid")
      }
      #expect(try s.send(.get(Self.item("x"))).status == 404)
      #expect(s.tmpEntries() == [])
    }
  }

  /// The session URI's path and query (the answer's `Location` is absolute).
  static func sessionPath(_ location: String?) throws -> String {
    let location = try #require(location)
    #expect(location.hasPrefix("http://127.0.0.1/upload/storage/v1/b/app/o?uploadType=resumable&name="))
    return String(location.dropFirst("http://127.0.0.1".count))
  }

  static func put(_ path: String, range: String?, body: [UInt8]) -> WireRequest {
    WireRequest("PUT", path, headers: range.map { [("Content-Range", $0)] } ?? [], body: body)
  }

  @Test func aResumableSessionTakesChunksAnswers308AndRefusesAWrongOffset() throws {
    try withService { s in
      let content = testBytes(700_000, seed: 22)
      let n = content.count
      let start = try s.send(
        WireRequest(
          "POST", "/upload/storage/v1/b/app/o?uploadType=resumable",
          headers: [
            ("Content-Type", "application/json"), ("X-Upload-Content-Type", "image/png"),
            ("X-Upload-Content-Length", String(n)),
          ],
          body: Array(#"{"name": "r/big.bin", "metadata": {"a": "b"}}"#.utf8)))
      #expect(start.status == 200, "\(start.text)")
      let session = try Self.sessionPath(start["Location"])

      let status0 = try s.send(Self.put(session, range: "bytes */\(n)", body: []))
      #expect(status0.status == 308)
      #expect(status0["Range"] == nil)

      let first = try s.send(
        Self.put(session, range: "bytes 0-262143/\(n)", body: Array(content[0..<262_144])))
      #expect(first.status == 308, "\(first.text)")
      #expect(first["Range"] == "bytes=0-262143")
      #expect(try s.send(.get(Self.item("r/big.bin"))).status == 404)

      // Not where the stored bytes end: nothing is appended, and the answer says what is stored.
      for wrong in ["bytes 0-99/\(n)", "bytes 262000-262999/\(n)", "bytes 300000-300999/*"] {
        let parts = wrong.dropFirst(6).split(separator: "/")[0].split(separator: "-").map { Int($0)! }
        let r = try s.send(Self.put(session, range: wrong, body: Array(content[parts[0]...parts[1]])))
        #expect(r.status == 308, "\(wrong): \(r.status) \(r.text)")
        #expect(r["Range"] == "bytes=0-262143")
      }
      let query = try s.send(Self.put(session, range: "bytes */*", body: []))
      #expect(query.status == 308)
      #expect(query["Range"] == "bytes=0-262143")

      // Content-Range and body disagree, a span beyond the total, a total that changes: 400.
      for (range, size) in [
        ("bytes 262144-262200/\(n)", 10), ("bytes 262144-\(n)/\(n)", n + 1 - 262_144),
        ("bytes 262144-262153/5", 10),
      ] {
        let r = try s.send(Self.put(session, range: range, body: [UInt8](repeating: 7, count: size)))
        #expect(r.status == 400, "\(range): \(r.text)")
        #expect((r.error?["errors"] as? [[String: Any]])?.first?["reason"] as? String == "invalid")
      }
      #expect(try s.send(Self.put(session, range: "bytes */*", body: []))["Range"] == "bytes=0-262143")

      let second = try s.send(
        Self.put(session, range: "bytes 262144-524287/*", body: Array(content[262_144..<524_288])))
      #expect(second.status == 308)
      #expect(second["Range"] == "bytes=0-524287")
      let last = try s.send(
        Self.put(session, range: "bytes 524288-\(n - 1)/\(n)", body: Array(content[524_288...])))
      #expect(last.status == 200, "\(last.text)")
      let json = try #require(last.json)
      #expect(json["name"] as? String == "r/big.bin")
      #expect(json["size"] as? String == String(n))
      #expect(json["contentType"] as? String == "image/png")
      #expect(json["metadata"] as? [String: String] == ["a": "b"])
      #expect(json["crc32c"] as? String == Self.crc32c(content))
      #expect(json["md5Hash"] as? String == Self.md5(content))
      #expect(try s.send(.get("/v0/b/app/o/r%2Fbig.bin?alt=media")).body == content)
      // The last chunk resent (its answer lost): the object it made, nothing written again.
      let again = try s.send(
        Self.put(session, range: "bytes 524288-\(n - 1)/\(n)", body: Array(content[524_288...])))
      #expect(again.status == 200)
      #expect(again.json?["generation"] as? String == json["generation"] as? String)
    }
  }

  @Test func aResumableSessionOfUnknownLengthEndsAtBytesStarSlashNAndCancelEndsIt() throws {
    try withService { s in
      let content = testBytes(300_000, seed: 23)
      let start = try s.send(
        WireRequest("POST", "/upload/storage/v1/b/app/o?uploadType=resumable&name=r%2Fstream.bin", body: []))
      let session = try Self.sessionPath(start["Location"])
      #expect(
        try s.send(Self.put(session, range: "bytes 0-262143/*", body: Array(content[..<262_144]))).status
          == 308)
      #expect(
        try s.send(Self.put(session, range: "bytes 262144-299999/*", body: Array(content[262_144...]))).status
          == 308)
      let done = try s.send(Self.put(session, range: "bytes */300000", body: []))
      #expect(done.status == 200, "\(done.text)")
      #expect(done.json?["size"] as? String == "300000")
      #expect(try s.send(.get(Self.item("r/stream.bin") + "?alt=media")).body == content)

      // A crc32c given at the start is checked on the last byte: a mismatch ends the session.
      let checked = try s.send(
        WireRequest(
          "POST", "/upload/storage/v1/b/app/o?uploadType=resumable",
          body: Array(#"{"name": "r/checked.bin", "crc32c": "AAAAAA=="}"#.utf8)))
      let checkedSession = try Self.sessionPath(checked["Location"])
      let mismatch = try s.send(
        Self.put(checkedSession, range: "bytes 0-9/10", body: [UInt8](repeating: 3, count: 10)))
      #expect(mismatch.status == 400, "\(mismatch.text)")
      #expect(try s.send(Self.put(checkedSession, range: "bytes */*", body: [])).status == 404)
      #expect(try s.send(.get(Self.item("r/checked.bin"))).status == 404)

      let other = try s.send(
        WireRequest(
          "POST", "/upload/storage/v1/b/app/o?uploadType=resumable&name=r%2Fcancelled.bin", body: []))
      let cancelled = try Self.sessionPath(other["Location"])
      #expect(
        try s.send(Self.put(cancelled, range: "bytes 0-9/*", body: [UInt8](repeating: 1, count: 10))).status
          == 308)
      #expect(try s.send(WireRequest("DELETE", cancelled)).status == 499)
      let gone = try s.send(Self.put(cancelled, range: "bytes */*", body: []))
      #expect(gone.status == 404)
      #expect((gone.error?["errors"] as? [[String: Any]])?.first?["reason"] as? String == "notFound")
      #expect(try s.send(.get(Self.item("r/cancelled.bin"))).status == 404)
    }
  }

  @Test func patchMergesMetadataNullClearsAndPutReplaces() throws {
    try withService { s in
      _ = try s.send(
        Self.multipart(
          #"{"name": "p.txt", "metadata": {"a": "1", "b": "2"}, "cacheControl": "no-cache"}"#, [1]))
      let patched = try s.send(
        WireRequest(
          "PATCH", Self.item("p.txt"),
          body: Array(
            #"{"metadata": {"b": null, "c": "3"}, "cacheControl": null, "contentLanguage": "de"}"#.utf8)))
      #expect(patched.status == 200, "\(patched.text)")
      #expect(patched.json?["metadata"] as? [String: String] == ["a": "1", "c": "3"])
      #expect(patched.json?["cacheControl"] == nil)
      #expect(patched.json?["contentLanguage"] as? String == "de")
      #expect(patched.json?["metageneration"] as? String == "2")
      let cleared = try s.send(
        WireRequest("PATCH", Self.item("p.txt"), body: Array(#"{"metadata": null}"#.utf8)))
      #expect(cleared.json?["metadata"] == nil)
      let replaced = try s.send(
        WireRequest(
          "PUT", Self.item("p.txt"),
          body: Array(#"{"metadata": {"only": "this"}, "contentType": "text/csv"}"#.utf8)))
      #expect(replaced.status == 200)
      #expect(replaced.json?["metadata"] as? [String: String] == ["only": "this"])
      #expect(replaced.json?["contentType"] as? String == "text/csv")
      #expect(replaced.json?["contentLanguage"] == nil)
      #expect(replaced.json?["metageneration"] as? String == "4")
      // Firebase sees the same metadata.
      #expect(
        try s.send(.get("/v0/b/app/o/p.txt")).json?["metadata"] as? [String: String] == ["only": "this"])
      let unknown = try s.send(
        WireRequest("PATCH", Self.item("p.txt"), body: Array(#"{"colour": "red"}"#.utf8)))
      #expect(unknown.status == 400)
    }
  }

  @Test func preconditionsAnswer412AndChangeNothing() throws {
    try withService { s in
      let v1 = try #require(try s.send(Self.media("pre.txt", [1], query: "&ifGenerationMatch=0")).json)
      let g1 = try #require(v1["generation"] as? String)
      let expectations: [(WireRequest, Int)] = [
        (Self.media("pre.txt", [2], query: "&ifGenerationMatch=0"), 412),
        (Self.media("pre.txt", [2], query: "&ifGenerationNotMatch=\(g1)"), 412),
        (Self.media("pre.txt", [2], query: "&ifMetagenerationMatch=2"), 412),
        (Self.multipart(#"{"name": "pre.txt"}"#, [2], query: "&ifGenerationMatch=0"), 412),
        (Self.multipart(#"{"name": "pre.txt"}"#, [2], query: "&ifMetagenerationNotMatch=1"), 412),
        (
          WireRequest("PATCH", Self.item("pre.txt") + "?ifMetagenerationMatch=9", body: Array("{}".utf8)), 412
        ),
        (WireRequest("PATCH", Self.item("pre.txt") + "?ifGenerationMatch=1", body: Array("{}".utf8)), 412),
        (WireRequest("DELETE", Self.item("pre.txt") + "?ifGenerationMatch=1"), 412),
        (WireRequest("DELETE", Self.item("pre.txt") + "?ifMetagenerationMatch=3"), 412),
        (.get(Self.item("pre.txt") + "?ifGenerationMatch=1"), 412),
        (.get(Self.item("pre.txt") + "?alt=media&ifMetagenerationMatch=2"), 412),
        (.get(Self.item("pre.txt") + "?ifGenerationNotMatch=\(g1)"), 304),
        (
          WireRequest("POST", Self.item("pre.txt") + "/copyTo/b/app/o/copy.txt?ifSourceGenerationMatch=1"),
          412
        ),
        (WireRequest("POST", Self.item("pre.txt") + "/copyTo/b/app/o/pre.txt?ifGenerationMatch=0"), 412),
        (
          WireRequest(
            "POST", Self.item("pre.txt") + "/compose?ifGenerationMatch=0",
            body: Array(#"{"sourceObjects": [{"name": "pre.txt"}]}"#.utf8)), 412
        ),
        (
          WireRequest(
            "POST", Self.item("c.txt") + "/compose",
            body: Array(
              #"{"sourceObjects": [{"name": "pre.txt", "objectPreconditions": {"ifGenerationMatch": "1"}}]}"#
                .utf8)),
          412
        ),
      ]
      for (request, status) in expectations {
        let r = try s.send(request)
        #expect(r.status == status, "\(request.method) \(request.target): \(r.status) \(r.text)")
        if status == 412 {
          #expect((r.error?["errors"] as? [[String: Any]])?.first?["reason"] as? String == "conditionNotMet")
        }
      }
      let now = try #require(try s.send(.get(Self.item("pre.txt"))).json)
      #expect(now["generation"] as? String == g1)
      #expect(now["metageneration"] as? String == "1")
      #expect(try s.send(.get(Self.item("copy.txt"))).status == 404)
      #expect(try s.send(.get(Self.item("c.txt"))).status == 404)
      // A resumable session: refused at its start, and again by its last byte when the object
      // appeared meanwhile (kept with the session, judged inside the publish).
      let early = try s.send(
        WireRequest(
          "POST", "/upload/storage/v1/b/app/o?uploadType=resumable&name=pre.txt&ifGenerationMatch=0", body: []
        ))
      #expect(early.status == 412)
      let start = try s.send(
        WireRequest(
          "POST", "/upload/storage/v1/b/app/o?uploadType=resumable&name=late.txt&ifGenerationMatch=0",
          body: []))
      let session = try Self.sessionPath(start["Location"])
      #expect(try s.send(Self.media("late.txt", [9])).status == 200)
      let late = try s.send(Self.put(session, range: "bytes 0-1/2", body: [1, 2]))
      #expect(late.status == 412, "\(late.text)")
      #expect(try s.send(.get(Self.item("late.txt") + "?alt=media")).body == [9])
      // And met, they pass.
      #expect(
        try s.send(Self.media("pre.txt", [3], query: "&ifGenerationMatch=\(g1)&ifMetagenerationMatch=1"))
          .status == 200)
      #expect(try s.send(.get(Self.item("pre.txt") + "?alt=media")).body == [3])
    }
  }

  @Test func listingsTakePrefixDelimiterOffsetsGlobAndPages() throws {
    try withService { s in
      let names = ["l/a.txt", "l/b.png", "l/d/", "l/d/x.txt", "l/d/y.png", "l/e/z.txt", "m.txt"]
      for name in names { _ = try s.upload(name, Array(name.utf8)) }
      func list(_ query: String) throws -> [String: Any] {
        let r = try s.send(.get("/storage/v1/b/app/o?\(query)"))
        #expect(r.status == 200, "\(query): \(r.text)")
        return r.json ?? [:]
      }
      func itemNames(_ json: [String: Any]) -> [String] {
        (json["items"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
      }
      let all = try list("")
      #expect(all["kind"] as? String == "storage#objects")
      #expect(itemNames(all) == names)
      let items = try #require(all["items"] as? [[String: Any]])
      #expect(items[0]["size"] as? String == "7")
      #expect(items[0]["kind"] as? String == "storage#object")
      let folded = try list("prefix=l/&delimiter=/")
      #expect(itemNames(folded) == ["l/a.txt", "l/b.png"])
      #expect(folded["prefixes"] as? [String] == ["l/d/", "l/e/"])
      let trailing = try list("prefix=l/&delimiter=/&includeTrailingDelimiter=true")
      #expect(itemNames(trailing) == ["l/a.txt", "l/b.png", "l/d/"])
      #expect(
        itemNames(try list("startOffset=l/b&endOffset=l/e")) == ["l/b.png", "l/d/", "l/d/x.txt", "l/d/y.png"])
      #expect(itemNames(try list("matchGlob=l/**.png")) == ["l/b.png", "l/d/y.png"])
      #expect(itemNames(try list("matchGlob=l/*.{txt,png}")) == ["l/a.txt", "l/b.png"])
      #expect(itemNames(try list("prefix=l/d/&fields=items(name)")) == ["l/d/", "l/d/x.txt", "l/d/y.png"])
      #expect(Set(try list("prefix=l/d/&fields=items(name)").keys) == ["items"])
      // Pages: maxResults, then pageToken until there is none.
      var seen: [String] = []
      var token: String?
      var pages = 0
      repeat {
        let page = try list("maxResults=3" + (token.map { "&pageToken=\(enc($0))" } ?? ""))
        seen += itemNames(page)
        token = page["nextPageToken"] as? String
        pages += 1
      } while token != nil
      #expect(seen == names)
      #expect(pages == 3)
      #expect(itemNames(try list("maxResults=5000")) == names)  // at most 1000 a page, as GCS
      #expect(try s.send(.get("/storage/v1/b/app/o?maxResults=0")).status == 400)
      #expect(try s.send(.get("/storage/v1/b/app/o?matchGlob=%5Bab")).status == 400)
      #expect(try s.send(.get("/storage/v1/b/app/o?pageToken=forged")).status == 400)
    }
  }

  @Test func copyRewriteAndComposeMakeObjectsFromStoredContent() throws {
    try withService { s in
      _ = try s.send(
        Self.multipart(
          #"{"name": "src/a.txt", "metadata": {"k": "v"}, "contentType": "text/plain"}"#, Array("alpha-".utf8)
        ))
      _ = try s.send(Self.media("src/b.txt", Array("beta".utf8)))
      let blobsBefore = s.blobFiles().count
      let copy = try s.send(
        WireRequest("POST", Self.item("src/a.txt") + "/copyTo/b/other/o/\(enc("dst/a copy.txt"))"))
      #expect(copy.status == 200, "\(copy.text)")
      #expect(copy.json?["bucket"] as? String == "other")
      #expect(copy.json?["name"] as? String == "dst/a copy.txt")
      #expect(copy.json?["metadata"] as? [String: String] == ["k": "v"])
      #expect(copy.json?["contentType"] as? String == "text/plain")
      #expect(copy.json?["crc32c"] as? String == Self.crc32c(Array("alpha-".utf8)))
      #expect(s.blobFiles().count == blobsBefore)  // no byte copied
      #expect(
        try s.send(.get("/v0/b/other/o/\(enc("dst/a copy.txt"))?alt=media")).body == Array("alpha-".utf8))
      let overridden = try s.send(
        WireRequest(
          "POST", Self.item("src/a.txt") + "/copyTo/b/app/o/dst%2Fb.txt",
          body: Array(#"{"metadata": {"n": "1"}}"#.utf8)))
      #expect(overridden.json?["metadata"] as? [String: String] == ["n": "1"])

      let rewrite = try s.send(
        WireRequest("POST", Self.item("src/b.txt") + "/rewriteTo/b/app/o/dst%2Frewritten.txt"))
      #expect(rewrite.status == 200, "\(rewrite.text)")
      #expect(rewrite.json?["kind"] as? String == "storage#rewriteResponse")
      #expect(rewrite.json?["totalBytesRewritten"] as? String == "4")
      #expect(rewrite.json?["objectSize"] as? String == "4")
      #expect(rewrite.json?["done"] as? Bool == true)
      #expect(rewrite.json?["rewriteToken"] == nil)
      #expect((rewrite.json?["resource"] as? [String: Any])?["name"] as? String == "dst/rewritten.txt")

      let compose = try s.send(
        WireRequest(
          "POST", Self.item("dst/composed.txt") + "/compose",
          body: Array(
            #"{"sourceObjects": [{"name": "src/a.txt"}, {"name": "src/b.txt"}, {"name": "src/a.txt"}], "destination": {"contentType": "text/plain", "metadata": {"c": "1"}}}"#
              .utf8)))
      #expect(compose.status == 200, "\(compose.text)")
      let expected = Array("alpha-betaalpha-".utf8)
      #expect(compose.json?["size"] as? String == "16")
      #expect(compose.json?["crc32c"] as? String == Self.crc32c(expected))
      #expect(compose.json?["metadata"] as? [String: String] == ["c": "1"])
      #expect(try s.send(.get("/v0/b/app/o/dst%2Fcomposed.txt?alt=media")).body == expected)

      let missing = try s.send(
        WireRequest(
          "POST", Self.item("dst/broken.txt") + "/compose",
          body: Array(#"{"sourceObjects": [{"name": "src/a.txt"}, {"name": "src/missing.txt"}]}"#.utf8)))
      #expect(missing.status == 404)
      #expect((missing.error?["errors"] as? [[String: Any]])?.first?["reason"] as? String == "notFound")
      let many = (0..<33).map { _ in #"{"name": "src/a.txt"}"# }.joined(separator: ",")
      let tooMany = try s.send(
        WireRequest(
          "POST", Self.item("dst/broken.txt") + "/compose",
          body: Array(#"{"sourceObjects": [\#(many)]}"#.utf8)))
      #expect(tooMany.status == 400)
      for body in ["", "{}", #"{"sourceObjects": []}"#, #"{"sourceObjects": [{"generation": "1"}]}"#] {
        #expect(
          try s.send(WireRequest("POST", Self.item("dst/broken.txt") + "/compose", body: Array(body.utf8)))
            .status == 400)
      }
      #expect(try s.send(.get(Self.item("dst/broken.txt"))).status == 404)
      #expect(
        try s.send(WireRequest("POST", Self.item("src/nope.txt") + "/copyTo/b/app/o/x.txt")).status == 404)
    }
  }

  @Test func namesWithSpacesUnicodeAndReservedCharactersRoundTrip() throws {
    try withService { s in
      for (i, name) in ["a b/c d.txt", "日本/ünï.txt", "#?&=+%", "%2F literal", "plus+sign & space"]
        .enumerated()
      {
        let content = Array("content \(i)".utf8)
        let up = try s.send(Self.multipart(#"{"name": "\#(name)"}"#, content))
        #expect(up.status == 200, "\(name): \(up.text)")
        #expect(up.json?["name"] as? String == name)
        #expect(try s.send(.get(Self.item(name) + "?alt=media")).body == content)
        #expect(try s.send(.get("/v0/b/app/o/\(enc(name))?alt=media")).body == content)
        // Google's clients send `+` for a space in the query, and `%2B` for a plus.
        let formPrefix = enc(name).replacingOccurrences(of: "%20", with: "+")
        let listed = try s.send(.get("/storage/v1/b/app/o?prefix=\(formPrefix)"))
        #expect((listed.json?["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == [name])
        #expect(try s.send(WireRequest("DELETE", Self.item(name))).status == 204)
        #expect(try s.send(.get("/v0/b/app/o/\(enc(name))")).status == 404)
      }
    }
  }

  @Test func bucketsAndPartialResponses() throws {
    try withService { s in
      _ = try s.upload("x", [1], bucket: "b-one")
      _ = try s.upload("y", [2], bucket: "b-two")
      let list = try s.send(.get("/storage/v1/b?project=test"))
      #expect(list.json?["kind"] as? String == "storage#buckets")
      #expect(
        (list.json?["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["b-one", "b-two"])
      let one = try s.send(.get("/storage/v1/b/b-one"))
      #expect(one.json?["kind"] as? String == "storage#bucket")
      #expect(one.json?["name"] as? String == "b-one")
      #expect(one.json?["storageClass"] as? String == "STANDARD")
      #expect(try s.send(.get("/storage/v1/b/Not_A_Bucket!")).status == 400)
      let fields = try s.send(.get(Self.item("x", bucket: "b-one") + "?fields=name,size&projection=full"))
      #expect(fields.json?.keys.sorted() == ["name", "size"])
      #expect(try s.send(.get(Self.item("x", bucket: "b-one") + "?fields=name(")).status == 400)
    }
  }

  @Test func rulesSeeTheSamePathsThroughBothAPIs() throws {
    let rules = try temporaryRulesFile(
      """
      rules_version = '2';
      service firebase.storage {
        match /b/{bucket}/o {
          match /public/{all=**} { allow read, write; }
        }
      }
      """)
    try withService(policy: .rulesFile(rules)) { s in
      #expect(try s.send(Self.media("public/a.txt", [1])).status == 200)
      let denied = try s.send(Self.media("private/a.txt", [1]))
      #expect(denied.status == 403)
      #expect((denied.error?["errors"] as? [[String: Any]])?.first?["reason"] as? String == "forbidden")
      #expect(try s.send(Self.multipart(#"{"name": "private/b.txt"}"#, [1])).status == 403)
      #expect(try s.send(.get(Self.item("public/a.txt") + "?alt=media")).body == [1])
      #expect(try s.send(.get(Self.item("private/a.txt"))).status == 403)
      #expect(
        try s.send(WireRequest("POST", Self.item("public/a.txt") + "/copyTo/b/app/o/private%2Fc.txt")).status
          == 403)
      #expect(try s.send(WireRequest("DELETE", Self.item("private/a.txt"))).status == 403)
      // The Firebase API answers the same, in its own shape.
      let fb = try s.send(.get("/v0/b/app/o/private%2Fa.txt"))
      #expect(fb.status == 403)
      #expect(fb.error?["status"] as? String == "PERMISSION_DENIED")
      #expect(fb.error?["errors"] == nil)
    }
  }
}
