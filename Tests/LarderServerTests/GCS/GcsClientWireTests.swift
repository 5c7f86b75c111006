import Foundation
import Larder
import LarderServer
import Testing

/// What the Google clients that are not installed here send (Node's `@google-cloud/storage`,
/// as firebase-admin wraps it; Go's client; Python clients writing bare-LF multipart bodies),
/// byte for byte on the wire, against a live server on 127.0.0.1:0.
@Suite struct GcsClientWireTests {
  /// `bytes` as a chunked body cut into chunks of `sizes` (repeated), with the last chunk.
  static func chunked(_ bytes: [UInt8], sizes: [Int] = [65_536, 1, 300_001, 7]) -> [UInt8] {
    var out: [UInt8] = []
    var offset = 0
    var i = 0
    while offset < bytes.count {
      let n = min(sizes[i % sizes.count], bytes.count - offset)
      out += Array(String(n, radix: 16).utf8) + [13, 10] + bytes[offset..<offset + n] + [13, 10]
      offset += n
      i += 1
    }
    return out + Array("0\r\n\r\n".utf8)
  }

  /// A `PUT` to a session URI as Node's client streams it: `Transfer-Encoding: chunked`.
  static func streamedPut(_ session: String, range: String, _ content: [UInt8]) -> WireRequest {
    var r = WireRequest(
      "PUT", session, headers: [("Content-Range", range), ("Transfer-Encoding", "chunked")],
      body: chunked(content))
    r.addLength = false
    return r
  }

  /// Starts a resumable session as Node's client does (`name` in the query, the resource as JSON).
  static func session(
    _ s: LiveService, name: String, resource: String = "{}", headers: [(String, String)] = []
  ) throws -> String {
    let start = try s.send(
      WireRequest(
        "POST", "/upload/storage/v1/b/app/o?name=\(enc(name))&uploadType=resumable",
        headers: [("Content-Type", "application/json")] + headers, body: Array(resource.utf8)))
    #expect(start.status == 200, "\(start.text)")
    return try GcsApiTests.sessionPath(start["Location"])
  }

  static func status(_ s: LiveService, _ session: String) throws -> WireResponse {
    try s.send(GcsApiTests.put(session, range: "bytes */*", body: []))
  }

  // MARK: - Node's default upload: one streamed PUT of unknown length

  @Test func nodesDefaultUploadIsOneChunkedPutOfUnknownLength() throws {
    try withService { s in
      let content = testBytes(3 * 1024 * 1024 + 17, seed: 91)
      let session = try Self.session(s, name: "node/big.bin", resource: #"{"contentType":"image/png"}"#)
      let r = try s.send(Self.streamedPut(session, range: "bytes 0-*/*", content))
      #expect(r.status == 200, "\(r.text)")
      let json = try #require(r.json)
      #expect(json["name"] as? String == "node/big.bin")
      #expect(json["size"] as? String == String(content.count))
      #expect(json["contentType"] as? String == "image/png")
      #expect(json["md5Hash"] as? String == GcsApiTests.md5(content))
      #expect(json["crc32c"] as? String == GcsApiTests.crc32c(content))
      let stored = try s.send(.get(GcsApiTests.item("node/big.bin") + "?alt=media"))
      #expect(sha256Hex(stored.body) == sha256Hex(content))
      // A later finalizing `bytes */N` (the answer was lost, or a client that finalizes
      // separately) finds the object that the streamed PUT made.
      let finalize = try s.send(GcsApiTests.put(session, range: "bytes */\(content.count)", body: []))
      #expect(finalize.status == 200, "\(finalize.text)")
      #expect(finalize.json?["generation"] as? String == json["generation"] as? String)

      // An empty file: the stream ends at once.
      let empty = try Self.session(s, name: "node/empty.txt")
      let e = try s.send(Self.streamedPut(empty, range: "bytes 0-*/*", []))
      #expect(e.status == 200, "\(e.text)")
      #expect(e.json?["size"] as? String == "0")

      // With the length known (Node's `contentLength` option): `bytes 0-*/N`.
      let known = try Self.session(s, name: "node/known.bin")
      let k = try s.send(Self.streamedPut(known, range: "bytes 0-*/\(content.count)", content))
      #expect(k.status == 200, "\(k.text)")
      #expect(k.json?["md5Hash"] as? String == GcsApiTests.md5(content))
      #expect(s.tmpEntries().isEmpty)
    }
  }

  @Test func aStreamedChunkThatStopsShortIsKeptAndTheSessionFinishesLater() throws {
    try withService { s in
      let content = testBytes(900_000, seed: 92)
      let n = content.count
      let session = try Self.session(
        s, name: "node/parts.bin", headers: [("X-Upload-Content-Length", String(n))])
      // `bytes 0-*/N` whose body ends before N: a chunk, stored; 308 says how far.
      let first = try s.send(Self.streamedPut(session, range: "bytes 0-*/\(n)", Array(content[..<400_000])))
      #expect(first.status == 308, "\(first.text)")
      #expect(first["Range"] == "bytes=0-399999")
      #expect(try s.send(.get(GcsApiTests.item("node/parts.bin"))).status == 404)
      let query = try s.send(GcsApiTests.put(session, range: "bytes */\(n)", body: []))
      #expect(query.status == 308)
      #expect(query["Range"] == "bytes=0-399999")

      // A chunked body with a span must fill it exactly; a short one keeps nothing.
      let short = try s.send(
        Self.streamedPut(session, range: "bytes 400000-499999/*", Array(content[400_000..<499_999])))
      #expect(short.status == 400, "\(short.text)")
      #expect(try Self.status(s, session)["Range"] == "bytes=0-399999")
      let long = try s.send(
        Self.streamedPut(session, range: "bytes 400000-499999/*", Array(content[400_000..<500_001])))
      #expect(long.status == 400, "\(long.text)")
      #expect(try Self.status(s, session)["Range"] == "bytes=0-399999")
      let exact = try s.send(
        Self.streamedPut(session, range: "bytes 400000-499999/*", Array(content[400_000..<500_000])))
      #expect(exact.status == 308, "\(exact.text)")
      #expect(exact["Range"] == "bytes=0-499999")
      // Not at the stored end: nothing appended.
      let wrong = try s.send(Self.streamedPut(session, range: "bytes 10-*/*", Array(content[10...])))
      #expect(wrong.status == 308)
      #expect(wrong["Range"] == "bytes=0-499999")
      // The rest, of unknown length: the object is complete at N.
      let rest = try s.send(Self.streamedPut(session, range: "bytes 500000-*/*", Array(content[500_000...])))
      #expect(rest.status == 200, "\(rest.text)")
      #expect(rest.json?["size"] as? String == String(n))
      #expect(
        sha256Hex(try s.send(.get(GcsApiTests.item("node/parts.bin") + "?alt=media")).body)
          == sha256Hex(content))
    }
  }

  @Test func aStreamedUploadOverTheLimitIs413MidStreamAndKeepsNothing() throws {
    try withService(configure: { $0.maxUploadSize = 1_000_000 }) { s in
      let session = try Self.session(s, name: "node/over.bin")
      let c = try WireConnection(port: s.port)
      // Sent whole (the socket buffers it); the server refuses when the limit is crossed.
      try? c.send(
        Self.streamedPut(session, range: "bytes 0-*/*", testBytes(1_000_001, seed: 93)).bytes(closing: true))
      let r = try c.readResponse()
      #expect(r.status == 413, "\(r.text)")
      #expect((r.error?["errors"] as? [[String: Any]])?.first?["reason"] as? String == "uploadTooLarge")
      #expect(pollUntil { s.tmpEntries().isEmpty })
      #expect(try s.send(.get(GcsApiTests.item("node/over.bin"))).status == 404)
      let after = try Self.status(s, session)
      #expect(after.status == 308)
      #expect(after["Range"] == nil)
      // Exactly at the limit, on the same session: done.
      let content = testBytes(1_000_000, seed: 94)
      let ok = try s.send(Self.streamedPut(session, range: "bytes 0-*/*", content))
      #expect(ok.status == 200, "\(ok.text)")
      #expect(ok.json?["md5Hash"] as? String == GcsApiTests.md5(content))
      let listed = try #require(try s.send(.get("/storage/v1/b/app/o")).json)
      #expect((listed["items"] as? [[String: Any]])?.compactMap { $0["size"] as? String } == ["1000000"])
    }
  }

  @Test func aStreamThatBreaksKeepsNothingAndTheUploadIsRedone() throws {
    try withService { s in
      let content = testBytes(2_000_000, seed: 101)
      let session = try Self.session(s, name: "node/broken.bin")
      let c = try WireConnection(port: s.port)
      let whole = Self.streamedPut(session, range: "bytes 0-*/*", content).bytes(closing: true)
      try c.send(Array(whole[..<1_200_000]))
      c.abort()
      // Node's client asks where to resume: nothing of the broken request was kept.
      let status = try Self.status(s, session)
      #expect(status.status == 308)
      #expect(status["Range"] == nil)
      // Resent whole once the broken request's hold on the session is gone (503 meanwhile).
      var last: WireResponse?
      #expect(
        pollUntil {
          last = try? s.send(Self.streamedPut(session, range: "bytes 0-*/*", content))
          return last?.status == 200
        }, "\(last?.status ?? 0) \(last?.text ?? "")")
      #expect(last?.json?["md5Hash"] as? String == GcsApiTests.md5(content))
      #expect(pollUntil { s.tmpEntries().isEmpty })
    }
  }

  @Test func rulesAndChecksumsJudgeAStreamedUpload() throws {
    let rules = try temporaryRulesFile(
      """
      rules_version = '2';
      service firebase.storage {
        match /b/{bucket}/o {
          match /{allPaths=**} {
            allow read;
            allow write: if request.resource.size < 1000;
          }
        }
      }
      """)
    defer { try? FileManager.default.removeItem(at: rules) }
    try withRulesService(rules: rules) { s in
      let big = try Self.session(s, name: "node/denied.bin")
      let denied = try s.send(Self.streamedPut(big, range: "bytes 0-*/*", testBytes(5000, seed: 95)))
      #expect(denied.status == 403, "\(denied.text)")
      #expect(try s.send(.get(GcsApiTests.item("node/denied.bin"))).status == 404)
      let small = try Self.session(s, name: "node/small.bin")
      #expect(
        try s.send(Self.streamedPut(small, range: "bytes 0-*/*", testBytes(999, seed: 96))).status == 200)

      let checked = try Self.session(s, name: "node/checked.bin", resource: #"{"crc32c":"AAAAAA=="}"#)
      let mismatch = try s.send(Self.streamedPut(checked, range: "bytes 0-*/*", testBytes(500, seed: 97)))
      #expect(mismatch.status == 400, "\(mismatch.text)")
      #expect(try s.send(.get(GcsApiTests.item("node/checked.bin"))).status == 404)
      let content = testBytes(500, seed: 98)
      let good = try Self.session(
        s, name: "node/good.bin", resource: #"{"md5Hash":"\#(GcsApiTests.md5(content))"}"#)
      #expect(try s.send(Self.streamedPut(good, range: "bytes 0-*/*", content)).status == 200)
    }
  }

  // MARK: - Go's client: chunks with POST

  @Test func aSessionTakesItsChunksWithPostAsGoogleDoes() throws {
    try withService { s in
      let content = testBytes(600_000, seed: 99)
      let session = try Self.session(s, name: "go/big.bin")
      func post(_ range: String, _ body: [UInt8], no308: Bool = false) throws -> WireResponse {
        let headers = [("Content-Range", range)] + (no308 ? [("X-GUploader-No-308", "yes")] : [])
        return try s.send(WireRequest("POST", session, headers: headers, body: body))
      }
      let first = try post("bytes 0-262143/*", Array(content[..<262_144]))
      #expect(first.status == 308, "\(first.text)")
      #expect(first["Range"] == "bytes=0-262143")
      #expect(first["X-Http-Status-Code-Override"] == nil)
      // Go's client asks for Resume Incomplete as 200 + X-Http-Status-Code-Override: 308.
      let second = try post("bytes 262144-524287/*", Array(content[262_144..<524_288]), no308: true)
      #expect(second.status == 200, "\(second.text)")
      #expect(second["X-Http-Status-Code-Override"] == "308")
      #expect(second["Range"] == "bytes=0-524287")
      let status = try post("bytes */*", [], no308: true)
      #expect(status.status == 200)
      #expect(status["X-Http-Status-Code-Override"] == "308")
      #expect(status["Range"] == "bytes=0-524287")
      let last = try post("bytes 524288-599999/600000", Array(content[524_288...]), no308: true)
      #expect(last["X-Http-Status-Code-Override"] == nil)
      #expect(last.status == 200, "\(last.text)")
      #expect(last.json?["md5Hash"] as? String == GcsApiTests.md5(content))
      // A POST with upload_id is never a new upload, whatever else it says.
      let stray = try s.send(
        WireRequest(
          "POST", session + "&uploadType=media", headers: [("Content-Range", "bytes */*")], body: []))
      #expect(stray.status == 200)
      #expect(stray.json?["generation"] as? String == last.json?["generation"] as? String)
    }
  }

  // MARK: - the JSON API at the root (firebase-admin for Node with STORAGE_EMULATOR_HOST)

  @Test func everyJSONAPICallAnswersAtTheRootToo() throws {
    try withService { s in
      for (name, text) in [("root/a.txt", "alpha"), ("root/b.txt", "beta"), ("other.txt", "o")] {
        #expect(try s.send(GcsApiTests.media(name, Array(text.utf8))).status == 200)
      }
      let item = "/b/app/o/\(enc("root/a.txt"))"
      let get = try s.send(.get(item))
      #expect(get.status == 200, "\(get.text)")
      #expect(get.json?["kind"] as? String == "storage#object")
      #expect(get.json?["size"] as? String == "5")
      #expect(try s.send(.get(item + "?alt=media")).text == "alpha")
      #expect(try s.send(.get(item + "?fields=name")).json?.keys.sorted() == ["name"])

      let list = try #require(try s.send(.get("/b/app/o?prefix=root%2F&delimiter=%2F")).json)
      #expect(
        (list["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == [
          "root/a.txt", "root/b.txt",
        ])
      let top = try #require(try s.send(.get("/b/app/o?delimiter=%2F")).json)
      #expect(top["prefixes"] as? [String] == ["root/"])

      let patch = try s.send(
        WireRequest(
          "PATCH", item, headers: [("Content-Type", "application/json")],
          body: Array(#"{"metadata":{"k":"v"}}"#.utf8)))
      #expect(patch.status == 200, "\(patch.text)")
      #expect(patch.json?["metadata"] as? [String: String] == ["k": "v"])
      #expect(patch.json?["metageneration"] as? String == "2")
      let update = try s.send(
        WireRequest(
          "PUT", item, headers: [("Content-Type", "application/json")],
          body: Array(#"{"contentType":"text/x-a"}"#.utf8)))
      #expect(update.status == 200, "\(update.text)")
      #expect(update.json?["contentType"] as? String == "text/x-a")

      let copy = try s.send(WireRequest("POST", item + "/copyTo/b/app/o/\(enc("copies/a.txt"))", body: []))
      #expect(copy.status == 200, "\(copy.text)")
      #expect(copy.json?["name"] as? String == "copies/a.txt")
      let rewrite = try s.send(WireRequest("POST", item + "/rewriteTo/b/other/o/\(enc("r.txt"))", body: []))
      #expect(rewrite.status == 200, "\(rewrite.text)")
      #expect(rewrite.json?["done"] as? Bool == true)
      #expect(try s.send(.get("/b/other/o/r.txt?alt=media")).text == "alpha")
      let compose = try s.send(
        WireRequest(
          "POST", "/b/app/o/\(enc("composed.txt"))/compose", headers: [("Content-Type", "application/json")],
          body: Array(#"{"sourceObjects":[{"name":"root/a.txt"},{"name":"root/b.txt"}]}"#.utf8)))
      #expect(compose.status == 200, "\(compose.text)")
      #expect(try s.send(.get("/b/app/o/composed.txt?alt=media")).text == "alphabeta")

      let bucket = try s.send(.get("/b/app"))
      #expect(bucket.status == 200)
      #expect(bucket.json?["kind"] as? String == "storage#bucket")
      let buckets = try #require(try s.send(.get("/b?project=p")).json)
      #expect(
        (buckets["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String }.sorted() == [
          "app", "other",
        ])

      #expect(try s.send(WireRequest("DELETE", item)).status == 204)
      let gone = try s.send(.get(item))
      #expect(gone.status == 404)
      // GCS-shaped errors at the root as under /storage/v1.
      #expect((gone.error?["errors"] as? [[String: Any]])?.first?["reason"] as? String == "notFound")
      #expect(try s.send(.get(GcsApiTests.item("root/a.txt"))).status == 404)

      // A bucket literally named "b".
      #expect(try s.send(GcsApiTests.media("x/o", Array("in b".utf8)).withBucket("b")).status == 200)
      #expect(try s.send(.get("/b/b/o/\(enc("x/o"))?alt=media")).text == "in b")
      #expect(try s.send(.get("/v0/b/b/o/\(enc("x/o"))?alt=media")).text == "in b")
      #expect(
        (try s.send(.get("/b/b/o")).json?["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
          == ["x/o"])
    }
  }

  // MARK: - multipart bodies with bare LF line breaks

  static let lfBoundary = "===============7330845974216740156=="
  /// Data with LF, CRLF, lone CR and near-delimiters in it.
  static let lfContent: [UInt8] =
    Array(
      "first line\nsecond\r\nthird\r\r\n\n--not the boundary\n--===============7330845974216740156=\n".utf8)
    + [0, 255, 13] + testBytes(70_000, seed: 100) + [10]

  static func lfBody(_ json: String, _ content: [UInt8]) -> [UInt8] {
    let b = lfBoundary
    return Array(
      "--\(b)\nContent-Type: application/json; charset=UTF-8\n\n\(json)\n--\(b)\nContent-Type: text/plain\n\n"
        .utf8)
      + content + Array("\n--\(b)--".utf8)
  }

  @Test func bareLFMultipartBodiesAreAcceptedOnBothMultipartPaths() throws {
    try withService { s in
      let type = [("Content-Type", "multipart/related; boundary=\"\(Self.lfBoundary)\"")]
      let gcs = try s.send(
        WireRequest(
          "POST", "/upload/storage/v1/b/app/o?uploadType=multipart", headers: type,
          body: Self.lfBody(#"{"name": "lf/gcs.bin", "metadata": {"via": "gcs"}}"#, Self.lfContent)))
      #expect(gcs.status == 200, "\(gcs.text)")
      #expect(gcs.json?["size"] as? String == String(Self.lfContent.count))
      #expect(gcs.json?["contentType"] as? String == "text/plain")
      #expect(gcs.json?["metadata"] as? [String: String] == ["via": "gcs"])
      let firebase = try s.send(
        WireRequest(
          "POST", "/v0/b/app/o?name=\(enc("lf/firebase.bin"))",
          headers: type + [("X-Goog-Upload-Protocol", "multipart")],
          body: Self.lfBody(#"{"contentType": "application/octet-stream"}"#, Self.lfContent)))
      #expect(firebase.status == 200, "\(firebase.text)")
      #expect(firebase.json?["size"] as? String == String(Self.lfContent.count))
      for name in ["lf/gcs.bin", "lf/firebase.bin"] {
        let stored = try s.send(.get("/v0/b/app/o/\(enc(name))?alt=media"))
        #expect(sha256Hex(stored.body) == sha256Hex(Self.lfContent), "\(name)")
      }
    }
  }

  @Test func mixedOrGarbageMultipartBodiesStillGetAClear400() throws {
    try withService { s in
      let b = Self.lfBoundary
      let type = [("Content-Type", "multipart/related; boundary=\"\(b)\"")]
      let cases: [(String, String, String)] = [
        (
          "LF opening, CRLF delimiters",
          "--\(b)\nContent-Type: application/json\n\n{\"name\":\"m.txt\"}\r\n--\(b)\r\nContent-Type: text/plain\r\n\r\nx\r\n--\(b)--",
          "mixes LF and CRLF"
        ),
        (
          "LF opening, CRLF headers",
          "--\(b)\nContent-Type: application/json\r\n\r\n{\"name\":\"m.txt\"}\n--\(b)\n\nx\n--\(b)--",
          "malformed header"
        ),
        ("garbage", "this is not multipart at all\n", "must start with --boundary"),
        ("CR without LF", "--\(b)\rContent-Type: application/json\r\r{}", "must start with --boundary"),
        (
          "LF, no closing delimiter",
          "--\(b)\nContent-Type: application/json\n\n{\"name\":\"m.txt\"}\n--\(b)\n\nx", "closing delimiter"
        ),
      ]
      for (label, body, reason) in cases {
        for path in ["/upload/storage/v1/b/app/o?uploadType=multipart", "/v0/b/app/o"] {
          let headers = path.hasPrefix("/v0") ? type + [("X-Goog-Upload-Protocol", "multipart")] : type
          let r = try s.send(WireRequest("POST", path, headers: headers, body: Array(body.utf8)))
          #expect(r.status == 400, "\(label) \(path): \(r.status) \(r.text)")
          #expect((r.error?["message"] as? String)?.contains(reason) == true, "\(label) \(path): \(r.text)")
        }
      }
      #expect(try s.send(.get("/v0/b/app/o/m.txt")).status == 404)
      #expect(s.blobFiles().isEmpty)
    }
  }
}

extension WireRequest {
  /// The same upload into another bucket (`/b/app/` of the target replaced).
  fileprivate func withBucket(_ bucket: String) -> WireRequest {
    var r = self
    r.target = r.target.replacingOccurrences(of: "/b/app/", with: "/b/\(bucket)/")
    return r
  }
}
