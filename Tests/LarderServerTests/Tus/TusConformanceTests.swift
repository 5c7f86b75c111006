import Foundation
import Larder
import LarderCrypto
import LarderHTTP
import LarderServer
import LarderTestSupport
import Testing

/// tus 1.0.0 against a live service: every status and header the endpoint promises.
@Suite struct TusConformanceTests {
  static let extensions =
    "creation,creation-with-upload,creation-defer-length,termination,checksum,expiration,concatenation"

  // MARK: core

  @Test func optionsAdvertisesVersionExtensionsLimitAndAlgorithms() throws {
    let h = try InProcessService(maxUploadSize: 1 << 20)
    let r = try h.request("OPTIONS", "/v0/b/app/uploads")
    #expect(r.status == 200)
    #expect(r["Tus-Version"] == "1.0.0")
    #expect(r["Tus-Extension"] == Self.extensions)
    #expect(r["Tus-Max-Size"] == "1048576")
    #expect(r["Tus-Checksum-Algorithm"] == "sha1,sha256,md5")
    #expect(r["Access-Control-Allow-Origin"] == nil)
    #expect(r.body.isEmpty)
  }

  @Test func optionsAnswersCORSPreflight() throws {
    let h = try InProcessService(corsOrigins: ["https://app.example"])
    let r = try h.request(
      "OPTIONS", "/v0/b/app/uploads/0123456789abcdef0123456789abcdef",
      headers: [
        ("Origin", "https://app.example"), ("Access-Control-Request-Method", "PATCH"),
        ("Access-Control-Request-Headers", "tus-resumable, upload-offset, content-type"),
      ])
    #expect(r.status == 200)
    #expect(r["Access-Control-Allow-Origin"] == "https://app.example")
    #expect(r["Access-Control-Allow-Methods"] == "POST, HEAD, PATCH, DELETE, OPTIONS")
    #expect(r["Access-Control-Allow-Headers"] == "tus-resumable, upload-offset, content-type")
    #expect(r["Access-Control-Max-Age"] == "86400")
    let other = try h.request(
      "OPTIONS", "/v0/b/app/uploads", headers: [("Origin", "https://evil.example")])
    #expect(other["Access-Control-Allow-Origin"] == nil)
  }

  @Test func missingOrUnsupportedTusResumableIs412WithVersion() throws {
    let h = try InProcessService()
    let path = try h.create(length: 4)
    let cases: [(String, String, [(String, String)])] = [
      ("POST", "/v0/b/app/uploads", [("Upload-Length", "4")]),
      ("HEAD", path, []),
      ("PATCH", path, [TusHarness.stream, ("Upload-Offset", "0")]),
      ("DELETE", path, []),
      ("POST", "/v0/b/app/uploads", [("Tus-Resumable", "0.2.2"), ("Upload-Length", "4")]),
    ]
    for (method, target, headers) in cases {
      let r = try h.request(method, target, headers: headers)
      #expect(r.status == 412, "\(method) \(headers)")
      #expect(r["Tus-Version"] == "1.0.0")
    }
    #expect(try h.head(path)["Upload-Offset"] == "0")
  }

  @Test func creationAnswers201WithLocationAndExpiry() throws {
    let h = try InProcessService(uploadExpiry: .seconds(7200))
    let before = Date()
    let r = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, ("Upload-Length", "10"),
        ("Upload-Metadata", TusHarness.metadata([("name", "a/b.txt")])),
      ])
    #expect(r.status == 201)
    #expect(r["Tus-Resumable"] == "1.0.0")
    let location = try #require(r["Location"])
    #expect(location.hasPrefix("/v0/b/app/uploads/"))
    let id = String(location.dropFirst("/v0/b/app/uploads/".count))
    #expect(id.count == 32 && id.allSatisfy { $0.isHexDigit && !$0.isUppercase })
    let expires = try #require(r["Upload-Expires"])
    #expect(expires.hasSuffix(" GMT") && expires.count == 29)
    #expect(h.uploadFiles == [id])
    let head = try h.head(location)
    #expect(head.status == 200)
    #expect(head["Upload-Offset"] == "0")
    #expect(head["Upload-Length"] == "10")
    #expect(head["Upload-Defer-Length"] == nil)
    #expect(head["Cache-Control"] == "no-store")
    #expect(head["Tus-Resumable"] == "1.0.0")
    #expect(head["Upload-Metadata"] == "name \(Data("a/b.txt".utf8).base64EncodedString())")
    #expect(head["Upload-Expires"] == expires)
    _ = before
  }

  @Test func locationIsBuiltFromThePublicURL() throws {
    let h = try InProcessService(publicURL: "https://files.example.com/")
    let location = try h.create(length: 3)
    #expect(location.hasPrefix("https://files.example.com/v0/b/app/uploads/"))
    let path = String(location.dropFirst("https://files.example.com".count))
    #expect(try h.head(path).status == 200)
  }

  @Test func creationRejectsBadLengthsAndMetadata() throws {
    let h = try InProcessService(maxUploadSize: 1000)
    let name = ("Upload-Metadata", TusHarness.metadata([("name", "x")]))
    let cases: [([(String, String)], Int, String)] = [
      ([name], 400, "Upload-Length or Upload-Defer-Length"),
      ([name, ("Upload-Length", "5"), ("Upload-Defer-Length", "1")], 400, "not both"),
      ([name, ("Upload-Defer-Length", "2")], 400, "Upload-Defer-Length must be 1"),
      ([name, ("Upload-Length", "-1")], 400, "non-negative"),
      ([name, ("Upload-Length", "12a")], 400, "non-negative"),
      ([name, ("Upload-Length", "99999999999999999999")], 400, "non-negative"),
      ([name, ("Upload-Length", "1001")], 413, "limit of 1000"),
      ([("Upload-Length", "5")], 400, "'name'"),
      (
        [("Upload-Length", "5"), ("Upload-Metadata", "filename \(Data("a".utf8).base64EncodedString())")],
        400, "'name'"
      ),
      ([("Upload-Length", "5"), ("Upload-Metadata", "name !!!")], 400, "not valid base64"),
      ([("Upload-Length", "5"), ("Upload-Metadata", "name eA")], 400, "not valid base64"),
      ([("Upload-Length", "5"), ("Upload-Metadata", "name eA==,name eQ==")], 400, "more than once"),
      ([("Upload-Length", "5"), ("Upload-Metadata", "name eA== extra")], 400, "is not 'key base64value'"),
      ([("Upload-Length", "5"), ("Upload-Metadata", "name eA==,,a YQ==")], 400, "is not 'key base64value'"),
      ([("Upload-Length", "5"), ("Upload-Metadata", "name /w==")], 400, "not UTF-8"),
      (
        [("Upload-Length", "5"), ("Upload-Metadata", TusHarness.metadata([("name", "../\u{0}x")]))], 400,
        "invalid object name"
      ),
    ]
    for (headers, status, message) in cases {
      let r = try h.request("POST", "/v0/b/app/uploads", headers: [TusHarness.tus] + headers)
      #expect(r.status == status, "\(headers)")
      #expect(r.text.contains(message), "\(headers): \(r.text)")
      #expect(r["Tus-Resumable"] == "1.0.0")
    }
    #expect(h.uploadFiles.isEmpty)
    // An empty Upload-Metadata header is accepted (for a partial upload, which needs no name).
    let partial = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, ("Upload-Length", "5"), ("Upload-Metadata", ""), ("Upload-Concat", "partial"),
      ])
    #expect(partial.status == 201)
  }

  // MARK: PATCH

  @Test func patchesAppendAndTheLastPublishesTheObject() throws {
    let h = try InProcessService()
    let data = testBytes(300_000)
    let path = try h.create(
      length: data.count, name: nil,
      extra: [
        (
          "Upload-Metadata",
          TusHarness.metadata([("name", "videos/v1.bin"), ("filename", "v1.bin"), ("album", "trip")])
        )
      ])
    var offset = 0
    for size in [100_000, 150_000, 50_000] {
      let r = try h.patch(path, offset: offset, Array(data[offset..<offset + size]))
      offset += size
      #expect(r.status == 204)
      #expect(r["Upload-Offset"] == String(offset))
      #expect(r["Tus-Resumable"] == "1.0.0")
      #expect(r["Upload-Expires"] != nil)
      #expect(r.body.isEmpty)
    }
    let bytes = try h.objectBytes("videos/v1.bin")
    #expect(bytes.status == 200)
    #expect(bytes.body == data)
    let meta = try h.request("GET", "/v0/b/app/o/videos%2Fv1.bin")
    let json = try #require(try JSONSerialization.jsonObject(with: Data(meta.body)) as? [String: Any])
    #expect(json["sha256"] as? String == sha256Hex(data))
    #expect(json["size"] as? String == "300000")
    #expect((json["metadata"] as? [String: String]) == ["album": "trip"])
    // The upload stays as a completed row without bytes.
    let head = try h.head(path)
    #expect(head.status == 200)
    #expect(head["Upload-Offset"] == "300000")
    #expect(head["Upload-Length"] == "300000")
    #expect(h.uploadFiles.isEmpty)
    // A retried last PATCH (answer lost) with the final offset and no body is acknowledged.
    let retry = try h.patch(path, offset: 300_000, [])
    #expect(retry.status == 204)
    #expect(retry["Upload-Offset"] == "300000")
    #expect(try h.patch(path, offset: 300_000, [1]).status == 413)
    #expect(try h.patch(path, offset: 0, [1]).status == 409)
  }

  @Test func patchErrors() throws {
    let h = try InProcessService()
    let path = try h.create(length: 10)
    let wrongType = try h.request(
      "PATCH", path,
      headers: [TusHarness.tus, ("Content-Type", "application/octet-stream"), ("Upload-Offset", "0")],
      body: [1, 2])
    #expect(wrongType.status == 415)
    let noType = try h.request(
      "PATCH", path, headers: [TusHarness.tus, ("Upload-Offset", "0")], body: [1, 2])
    #expect(noType.status == 415)
    let noOffset = try h.request(
      "PATCH", path, headers: [TusHarness.tus, TusHarness.stream], body: [1, 2])
    #expect(noOffset.status == 400)
    #expect(try h.patch(path, offset: 0, [1, 2], extra: []).status == 204)
    let mismatch = try h.patch(path, offset: 1, [3])
    #expect(mismatch.status == 409)
    #expect(mismatch.text.contains("offset 2"))
    #expect(mismatch["Tus-Resumable"] == "1.0.0")
    let tooMuch = try h.patch(path, offset: 2, testBytes(9))
    #expect(tooMuch.status == 413)
    #expect(try h.head(path)["Upload-Offset"] == "2")
    #expect(try h.patch("/v0/b/app/uploads/0123456789abcdef0123456789abcdef", offset: 0, [1]).status == 404)
    #expect(try h.patch("/v0/b/app/uploads/..%2F..%2Flarder.sqlite", offset: 0, [1]).status == 404)
    #expect(try h.head("/v0/b/app/uploads/NOTANID").status == 404)
    #expect(try h.head("/v0/b/other/uploads/\(path.split(separator: "/").last!)").status == 404)
    #expect(try h.request("PUT", path, headers: [TusHarness.tus]).status == 405)
    #expect(try h.request("GET", "/v0/b/app/uploads", headers: [TusHarness.tus]).status == 405)
    // Still usable after every refusal.
    #expect(try h.patch(path, offset: 2, testBytes(8)).status == 204)
    #expect(try h.objectBytes("file.bin").body == [1, 2] + testBytes(8))
  }

  @Test func methodOverrideIsHonoured() throws {
    let h = try InProcessService()
    let path = try h.create(length: 3)
    let r = try h.request(
      "POST", path,
      headers: [
        TusHarness.tus, TusHarness.stream, ("Upload-Offset", "0"), ("X-HTTP-Method-Override", "PATCH"),
      ],
      body: [7, 8])
    #expect(r.status == 204)
    #expect(r["Upload-Offset"] == "2")
    let d = try h.request("POST", path, headers: [TusHarness.tus, ("X-HTTP-Method-Override", "DELETE")])
    #expect(d.status == 204)
    #expect(try h.head(path).status == 404)
  }

  // MARK: checksum

  @Test func checksumsAreVerifiedPerPatch() throws {
    let h = try InProcessService()
    let data = testBytes(3000)
    let path = try h.create(length: data.count)
    let a = Array(data[0..<1000])
    let b = Array(data[1000..<2000])
    let c = Array(data[2000...])
    #expect(try h.patch(path, offset: 0, a, extra: [checksumHeader(.sha1, a)]).status == 204)
    // A mismatch discards the chunk: 460 and the offset stays.
    let bad = try h.patch(path, offset: 1000, b, extra: [checksumHeader(.sha256, a)])
    #expect(bad.status == 460)
    #expect(bad["Tus-Resumable"] == "1.0.0")
    #expect(try h.head(path)["Upload-Offset"] == "1000")
    #expect(try h.patch(path, offset: 1000, b, extra: [checksumHeader(.sha256, b)]).status == 204)
    let unsupported = try h.patch(path, offset: 2000, c, extra: [("Upload-Checksum", "crc32 AAAAAA==")])
    #expect(unsupported.status == 400)
    #expect(try h.patch(path, offset: 2000, c, extra: [("Upload-Checksum", "md5 not-base64")]).status == 400)
    #expect(try h.patch(path, offset: 2000, c, extra: [("Upload-Checksum", "md5")]).status == 400)
    let wrongLength = ("Upload-Checksum", "sha1 \(Data(Digest.hash(.md5, c)).base64EncodedString())")
    #expect(try h.patch(path, offset: 2000, c, extra: [wrongLength]).status == 400)
    // A mismatch on the last chunk publishes nothing.
    #expect(try h.patch(path, offset: 2000, c, extra: [checksumHeader(.md5, a)]).status == 460)
    #expect(try h.objectBytes("file.bin").status == 404)
    #expect(try h.patch(path, offset: 2000, c, extra: [checksumHeader(.md5, c)]).status == 204)
    #expect(try h.objectBytes("file.bin").body == data)
  }

  // MARK: creation-defer-length, creation-with-upload

  @Test func deferredLengthIsSetByALaterPatchAndThenFixed() throws {
    let h = try InProcessService(maxUploadSize: 1 << 20)
    let path = try h.create(length: nil)
    var head = try h.head(path)
    #expect(head["Upload-Defer-Length"] == "1")
    #expect(head["Upload-Length"] == nil)
    #expect(try h.patch(path, offset: 0, testBytes(100)).status == 204)
    #expect(try h.patch(path, offset: 100, [], extra: [("Upload-Length", "99")]).status == 400)
    #expect(try h.patch(path, offset: 100, [], extra: [("Upload-Length", "2000000")]).status == 413)
    let r = try h.patch(path, offset: 100, Array(testBytes(250)[100..<200]), extra: [("Upload-Length", "250")])
    #expect(r.status == 204)
    #expect(r["Upload-Offset"] == "200")
    head = try h.head(path)
    #expect(head["Upload-Length"] == "250")
    #expect(head["Upload-Defer-Length"] == nil)
    #expect(try h.patch(path, offset: 200, [], extra: [("Upload-Length", "300")]).status == 400)
    #expect(
      try h.patch(path, offset: 200, Array(testBytes(250)[200...]), extra: [("Upload-Length", "250")]).status
        == 204)
    #expect(try h.objectBytes("file.bin").body == testBytes(250))
  }

  @Test func aDeferredUploadCannotGrowPastTheMaximumSize() throws {
    let h = try InProcessService(maxUploadSize: 1000)
    let path = try h.create(length: nil)
    #expect(try h.patch(path, offset: 0, testBytes(600)).status == 204)
    let over = try h.patch(path, offset: 600, testBytes(401))
    #expect(over.status == 413)
    #expect(over["Tus-Resumable"] == "1.0.0")
    #expect(try h.head(path)["Upload-Offset"] == "600")
    #expect(try h.patch(path, offset: 600, testBytes(400), extra: [("Upload-Length", "1000")]).status == 204)
    #expect(try h.objectBytes("file.bin").body == testBytes(600) + testBytes(400))
  }

  @Test func creationWithUploadCarriesTheFirstChunk() throws {
    let h = try InProcessService()
    let data = testBytes(5000)
    let first = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, TusHarness.stream, ("Upload-Length", "5000"),
        ("Upload-Metadata", TusHarness.metadata([("name", "cwu.bin")])),
      ], body: Array(data[0..<2000]))
    #expect(first.status == 201)
    #expect(first["Upload-Offset"] == "2000")
    #expect(first["Upload-Expires"] != nil)
    let path = try #require(first["Location"])
    #expect(try h.head(path)["Upload-Offset"] == "2000")
    #expect(try h.patch(path, offset: 2000, Array(data[2000...])).status == 204)
    #expect(try h.objectBytes("cwu.bin").body == data)
    // The whole file in the POST.
    let whole = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, TusHarness.stream, ("Upload-Length", "5"), checksumHeader(.sha256, [1, 2, 3, 4, 5]),
        ("Upload-Metadata", TusHarness.metadata([("name", "whole.bin")])),
      ], body: [1, 2, 3, 4, 5])
    #expect(whole.status == 201)
    #expect(whole["Upload-Offset"] == "5")
    #expect(try h.objectBytes("whole.bin").body == [1, 2, 3, 4, 5])
    // A body longer than Upload-Length creates nothing.
    let over = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, TusHarness.stream, ("Upload-Length", "2"),
        ("Upload-Metadata", TusHarness.metadata([("name", "over.bin")])),
      ], body: [1, 2, 3])
    #expect(over.status == 413)
  }

  @Test func zeroLengthUploadIsPublishedAtCreation() throws {
    let h = try InProcessService()
    let r = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, ("Upload-Length", "0"), ("Upload-Metadata", TusHarness.metadata([("name", "empty")])),
      ])
    #expect(r.status == 201)
    #expect(r["Upload-Offset"] == "0")
    let bytes = try h.objectBytes("empty")
    #expect(bytes.status == 200)
    #expect(bytes.body.isEmpty)
  }

  // MARK: termination, expiration

  @Test func terminationDeletesTheUploadAndItsBytes() throws {
    let h = try InProcessService()
    let path = try h.create(length: 100)
    #expect(try h.patch(path, offset: 0, testBytes(40)).status == 204)
    let d = try h.request("DELETE", path, headers: [TusHarness.tus])
    #expect(d.status == 204)
    #expect(d["Tus-Resumable"] == "1.0.0")
    #expect(h.uploadFiles.isEmpty)
    #expect(try h.head(path).status == 404)
    #expect(try h.patch(path, offset: 40, testBytes(60)).status == 404)
    #expect(try h.request("DELETE", path, headers: [TusHarness.tus]).status == 404)
  }

  @Test func expiredUploadsAnswer410AndTheCollectorReclaimsThem() throws {
    let h = try InProcessService(uploadExpiry: .milliseconds(1))
    let path = try h.create(length: 100)
    Thread.sleep(forTimeInterval: 0.05)
    #expect(try h.head(path).status == 410)
    #expect(try h.patch(path, offset: 0, testBytes(10)).status == 410)
    #expect(try h.request("DELETE", path, headers: [TusHarness.tus]).status == 410)
    let report = try GarbageCollector(larder: h.service.larder).collect()
    #expect(report.uploadsExpired == 1)
    #expect(h.uploadFiles.isEmpty)
    #expect(try h.head(path).status == 404)
  }

  @Test func patchExtendsTheExpiry() throws {
    let h = try InProcessService(uploadExpiry: .seconds(3600))
    let path = try h.create(length: 10)
    let created = try #require(try h.head(path)["Upload-Expires"])
    Thread.sleep(forTimeInterval: 1.1)
    let r = try h.patch(path, offset: 0, [1])
    let extended = try #require(r["Upload-Expires"])
    #expect(extended != created)
    #expect(try h.head(path)["Upload-Expires"] == extended)
  }

  // MARK: concatenation

  @Test func finalUploadIsTheConcatenationOfItsPartials() throws {
    let h = try TusHarness()
    let a = testBytes(70_000, seed: 11)
    let b = testBytes(30_000, seed: 12)
    var paths: [String] = []
    for part in [a, b] {
      let r = try h.request(
        "POST", "/v0/b/app/uploads",
        headers: [TusHarness.tus, ("Upload-Length", String(part.count)), ("Upload-Concat", "partial")])
      #expect(r.status == 201)
      let path = try #require(r["Location"])
      #expect(try h.head(path)["Upload-Concat"] == "partial")
      paths.append(path)
    }
    #expect(try h.patch(paths[0], offset: 0, a).status == 204)
    // An unfinished partial cannot be concatenated.
    let early = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, ("Upload-Concat", "final;\(paths[0]) \(paths[1])"),
        ("Upload-Metadata", TusHarness.metadata([("name", "joined.bin")])),
      ])
    #expect(early.status == 400)
    #expect(try h.patch(paths[1], offset: 0, b).status == 204)
    // Partials never appear as objects.
    let list = try h.request("GET", "/v0/b/app/o")
    #expect(list.text == #"{"items":[],"prefixes":[]}"#)
    let withLength = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, ("Upload-Length", "100000"), ("Upload-Concat", "final;\(paths[0]) \(paths[1])"),
        ("Upload-Metadata", TusHarness.metadata([("name", "joined.bin")])),
      ])
    #expect(withLength.status == 400)
    let noName = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [TusHarness.tus, ("Upload-Concat", "final;\(paths[0]) \(paths[1])")])
    #expect(noName.status == 400)
    let final = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, ("Upload-Concat", "final;http://127.0.0.1:\(h.service.port)\(paths[0]) \(paths[1])"),
        ("Upload-Metadata", TusHarness.metadata([("name", "joined.bin")])),
      ])
    #expect(final.status == 201)
    let finalPath = try #require(final["Location"])
    let head = try h.head(finalPath)
    #expect(head["Upload-Length"] == "100000")
    #expect(head["Upload-Offset"] == "100000")
    // Echoed exactly as sent: the absolute URL stays absolute.
    #expect(head["Upload-Concat"] == "final;http://127.0.0.1:\(h.service.port)\(paths[0]) \(paths[1])")
    #expect(try h.patch(finalPath, offset: 100_000, [1]).status == 403)
    #expect(try h.objectBytes("joined.bin").body == a + b)
    let names = try h.request("GET", "/v0/b/app/o")
    #expect(names.text.contains("\"name\":\"joined.bin\""))
    #expect(names.text.components(separatedBy: "\"name\"").count == 2)
    let bogus = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, ("Upload-Concat", "final;/v0/b/app/uploads/nothex"),
        ("Upload-Metadata", TusHarness.metadata([("name", "x")])),
      ])
    #expect(bogus.status == 400)
    let notPartial = try h.create(length: 1, name: "single")
    let wrongKind = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, ("Upload-Concat", "final;\(notPartial)"),
        ("Upload-Metadata", TusHarness.metadata([("name", "x")])),
      ])
    #expect(wrongKind.status == 400)
  }

  // MARK: concurrency, ownership, policy, CORS

  @Test func aSecondPatchWhileOneStreamsGets423() throws {
    let h = try TusHarness()
    let path = try h.create(length: 1000)
    // The probe (an empty PATCH) holds the upload for a moment too: if the streaming PATCH
    // arrives in that moment it is the one refused, and the attempt starts over.
    var holder: WireConnection?
    var status = 0
    attempts: for _ in 0..<50 {
      let connection = try WireConnection(port: h.service.port)
      var streaming = WireRequest("PATCH", path, headers: [TusHarness.tus, TusHarness.stream, ("Upload-Offset", "0"), ("Content-Length", "1000")])
      streaming.addLength = false
      try connection.send(streaming.head(closing: true))
      try connection.send(testBytes(400))
      for _ in 0..<400 {
        status = try h.patch(path, offset: 0, []).status
        if status == 423 {
          holder = connection
          break attempts
        }
        var p = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
        if poll(&p, 1, 0) > 0 { break }  // the streaming PATCH was answered (refused): retry
        Thread.sleep(forTimeInterval: 0.05)
      }
      connection.close()
    }
    #expect(status == 423)
    guard let holder else { return }
    // A body that cannot fit is refused from its head, before the lease is asked for: 413 while
    // another PATCH holds the upload, not 423 (and nothing of it is appended).
    // (At the offset the upload has now: a checkpoint of the streaming PATCH may have moved it.)
    let now = try #require(Int(try h.head(path)["Upload-Offset"] ?? ""))
    let over = try h.patch(path, offset: now, testBytes(1001 - now))
    #expect(over.status == 413, "\(over.status) \(over.text)")
    try holder.send(Array(testBytes(1000)[400...]))
    let first = try holder.readResponse()
    #expect(first.status == 204)
    #expect(first["Upload-Offset"] == "1000")
    #expect(try h.objectBytes("file.bin").body == testBytes(1000))
  }

  @Test func aBrokenOffBodyKeepsWhatArrivedAndFreesTheUpload() throws {
    // The HTTP layer sometimes notices a vanished client only at its idle timeout: keep it short.
    let h = try TusHarness(connectionTimeout: 2)
    let data = testBytes(100_000)
    let path = try h.create(length: 100_000)
    let connection = try WireConnection(port: h.service.port)
    var streaming = WireRequest("PATCH", path, headers: [TusHarness.tus, TusHarness.stream, ("Upload-Offset", "0"), ("Content-Length", "100000")])
    streaming.addLength = false
    try connection.send(streaming.head(closing: true))
    try connection.send(Array(data[0..<60_000]))
    connection.close()  // the client goes away mid-body
    // Once the server has let go of the upload, the bytes it received are committed.
    var offset = -1
    for _ in 0..<600 {
      offset = Int(try h.head(path)["Upload-Offset"] ?? "") ?? -1
      if try h.patch(path, offset: offset, []).status == 204 { break }
      Thread.sleep(forTimeInterval: 0.05)
    }
    #expect((0...60_000).contains(offset))
    #expect(try h.patch(path, offset: offset, Array(data[offset...])).status == 204)
    #expect(try h.objectBytes("file.bin").body == data)
  }

  @Test func uploadsAreVisibleOnlyToTheirCreator() throws {
    let h = try InProcessService()
    let alice = h.service.developmentToken(uid: "alice")
    let bob = h.service.developmentToken(uid: "bob")
    let path = try h.create(length: 4, token: alice)
    let asAlice = [("Authorization", "Bearer \(alice)")]
    #expect(try h.head(path, extra: asAlice).status == 200)
    #expect(try h.head(path, extra: [("Authorization", "Bearer \(bob)")]).status == 404)
    #expect(try h.head(path).status == 404)
    #expect(try h.patch(path, offset: 0, [1], extra: [("Authorization", "Bearer \(bob)")]).status == 404)
    #expect(
      try h.request("DELETE", path, headers: [TusHarness.tus, ("Authorization", "Bearer \(bob)")]).status
        == 404)
    #expect(try h.patch(path, offset: 0, [1, 2, 3, 4], extra: asAlice).status == 204)
    // An anonymous upload is continued only anonymously.
    let anonymous = try h.create(length: 2, name: "anon")
    #expect(try h.head(anonymous, extra: asAlice).status == 404)
    #expect(try h.patch(anonymous, offset: 0, [1, 2]).status == 204)
  }

  @Test func policyIsAskedAtCreationAndAgainOnTheRealContent() throws {
    let h = try InProcessService(policy: .custom(NoPNGPolicy()))
    let denied = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, ("Upload-Length", "4"),
        ("Upload-Metadata", TusHarness.metadata([("name", "forbidden.txt")])),
      ])
    #expect(denied.status == 403)
    #expect(denied["Tus-Resumable"] == "1.0.0")
    // Declared as text; the bytes are a PNG: the last PATCH is refused and the upload deleted.
    let png: [UInt8] =
      [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8)
      + [0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89]
    let path = try h.create(
      length: png.count, name: nil,
      extra: [("Upload-Metadata", TusHarness.metadata([("name", "pic.txt"), ("contentType", "text/plain")]))])
    #expect(try h.patch(path, offset: 0, Array(png[0..<10])).status == 204)
    let last = try h.patch(path, offset: 10, Array(png[10...]))
    #expect(last.status == 403)
    #expect(try h.objectBytes("pic.txt").status == 404)
    #expect(try h.head(path).status == 404)
    #expect(h.uploadFiles.isEmpty)
  }

  @Test(TestBlobs.filesystemOnly) func onlyADenialDeletesTheUploadOtherFailuresKeepItResumable() throws {
    let h = try InProcessService(policy: .custom(NoPNGPolicy()))
    let data = testBytes(5000, seed: 21)
    let path = try h.create(length: data.count, name: "kept.bin")
    #expect(try h.patch(path, offset: 0, Array(data[0..<2000])).status == 204)
    // Publishing fails (not the policy): a file where the blob's shard directory must go.
    let shard = Hex.encode(Digest.hash(.sha256, data)).prefix(2)
    let blocker = h.directory.appendingPathComponent("blobs/sha256/\(shard)").path
    #expect(FileManager.default.createFile(atPath: blocker, contents: Data([1])))
    let failed = try h.patch(path, offset: 2000, Array(data[2000...]))
    #expect(failed.status == 500)
    #expect(failed["Tus-Resumable"] == "1.0.0")
    let head = try h.head(path)
    #expect(head.status == 200)
    #expect(head["Upload-Offset"] == "2000")
    #expect(try h.objectBytes("kept.bin").status == 404)
    try FileManager.default.removeItem(atPath: blocker)
    #expect(try h.patch(path, offset: 2000, Array(data[2000...])).status == 204)
    #expect(try h.objectBytes("kept.bin").body == data)
  }

  /// (With blobs in S3 a partial's bytes are in the bucket: `SharedUploadTests` removes them there.)
  @Test(TestBlobs.filesystemOnly) func concatenationOfAPartialWhoseBytesVanishedIs410() throws {
    let h = try InProcessService()
    let r = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [TusHarness.tus, ("Upload-Length", "3"), ("Upload-Concat", "partial")])
    let partial = try #require(r["Location"])
    #expect(try h.patch(partial, offset: 0, [1, 2, 3]).status == 204)
    let id = String(partial.split(separator: "/").last!)
    try FileManager.default.removeItem(at: h.directory.appendingPathComponent("uploads/\(id)"))
    let final = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, ("Upload-Concat", "final;\(partial)"),
        ("Upload-Metadata", TusHarness.metadata([("name", "gone.bin")])),
      ])
    #expect(final.status == 410)
    #expect(final["Tus-Resumable"] == "1.0.0")
    #expect(final.text.contains("upload-data-lost") || final.text.contains("missing"))
  }

  @Test func corsHeadersOnTusAnswers() throws {
    let h = try InProcessService(corsOrigins: ["https://app.example"])
    let origin = ("Origin", "https://app.example")
    let r = try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [
        TusHarness.tus, origin, ("Upload-Length", "3"),
        ("Upload-Metadata", TusHarness.metadata([("name", "c")])),
      ])
    #expect(r["Access-Control-Allow-Origin"] == "https://app.example")
    let expose = try #require(r["Access-Control-Expose-Headers"])
    for name in ["Location", "Upload-Offset", "Upload-Length", "Upload-Expires", "Tus-Resumable"] {
      #expect(expose.contains(name))
    }
    let path = try #require(r["Location"])
    let p = try h.patch(path, offset: 0, [1, 2], extra: [origin])
    #expect(p["Access-Control-Allow-Origin"] == "https://app.example")
    #expect(p["Access-Control-Expose-Headers"]?.contains("Upload-Offset") == true)
    #expect(try h.head(path, extra: [origin])["Access-Control-Allow-Origin"] == "https://app.example")
  }
}
