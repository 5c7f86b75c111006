import Foundation
import LarderTestSupport
import Larder
import LarderCrypto
import LarderServer
import Testing

/// `uploadBytesResumable`: `X-Goog-Upload-Protocol: resumable` sessions against a live server.
@Suite struct FirebaseResumableUploadTests {
  static let chunk = 256 * 1024

  @Test func startChunksAndFinalizeAsTheSDKDoes() throws {
    try withInProcessService { s in
      try s.upload("video.bin", Array("old".utf8))
      let before = try #require(try s.snapshot("video.bin"))
      let content = testBytes(3 * Self.chunk + 1000, seed: 5)
      let json: [String: Any] = [
        "name": "video.bin", "contentType": "application/octet-stream", "metadata": ["Camera": "X100"],
        "cacheControl": "private, max-age=5", "md5Hash": Data(Digest.hash(.md5, content)).base64EncodedString(),
      ]
      let start = try s.send(FirebaseWire.start("video.bin", length: content.count, json: json))
      #expect(start.status == 200, "\(start.text)")
      #expect(start["X-Goog-Upload-Status"] == "active")
      let url = try #require(start["X-Goog-Upload-URL"])
      let id = try #require(start["X-GUploader-UploadID"])
      #expect(url == "http://127.0.0.1/v0/b/app/o?name=video.bin&upload_id=\(id)&upload_protocol=resumable")
      // The object is untouched until the last byte.
      #expect(try s.snapshot("video.bin")?.bytes == before.bytes)
      #expect(try s.uploadRows() == 1)

      var offset = 0
      for size in [Self.chunk, 2 * Self.chunk] {
        let r = try s.send(FirebaseWire.command(url, "upload", offset: offset, body: Array(content[offset..<(offset + size)])))
        #expect(r.status == 200, "\(r.text)")
        #expect(r["X-Goog-Upload-Status"] == "active")
        offset += size
        let q = try s.send(FirebaseWire.command(url, "query", offset: nil))
        #expect(q.status == 200)
        #expect(q["X-Goog-Upload-Status"] == "active")
        #expect(q["X-Goog-Upload-Size-Received"] == String(offset))
        #expect(try s.snapshot("video.bin")?.generation == before.generation)
      }
      let last = try s.send(FirebaseWire.command(url, "upload, finalize", offset: offset, body: Array(content[offset...])))
      #expect(last.status == 200, "\(last.text)")
      #expect(last["X-Goog-Upload-Status"] == "final")
      let meta = try #require(last.json)
      #expect(meta["name"] as? String == "video.bin")
      #expect(meta["size"] as? String == String(content.count))
      #expect(meta["sha256"] as? String == sha256Hex(content))
      #expect(meta["metadata"] as? [String: String] == ["Camera": "X100"])
      #expect(meta["cacheControl"] as? String == "private, max-age=5")
      #expect(meta["generation"] as? String != before.generation)
      #expect(try s.snapshot("video.bin")?.bytes == content)
      let q = try s.send(FirebaseWire.command(url, "query", offset: nil))
      #expect(q["X-Goog-Upload-Status"] == "final")
      #expect(q["X-Goog-Upload-Size-Received"] == String(content.count))
      #expect(s.uploadFiles == [])
      // The last chunk resent (its answer lost): the same final answer, nothing written again.
      let again = try s.send(FirebaseWire.command(url, "upload, finalize", offset: offset, body: Array(content[offset...])))
      #expect(again.status == 200)
      #expect(again["X-Goog-Upload-Status"] == "final")
      #expect(again.json?["generation"] as? String == meta["generation"] as? String)
    }
  }

  @Test func aWrongOffsetIsRefusedAndNothingIsAppended() throws {
    try withInProcessService { s in
      let content = testBytes(2 * Self.chunk, seed: 6)
      let url = try s.startSession("o.bin", length: content.count)
      #expect(try s.send(FirebaseWire.command(url, "upload", offset: 0, body: Array(content[..<1000]))).status == 200)
      for wrong in [0, 999, 1001, 5000] {
        let r = try s.send(FirebaseWire.command(url, "upload", offset: wrong, body: Array(content[1000..<2000])))
        #expect(r.status == 409, "offset \(wrong): \(r.status) \(r.text)")
        #expect(r.error?["code"] as? Int == 409)
      }
      let q = try s.send(FirebaseWire.command(url, "query", offset: nil))
      #expect(q["X-Goog-Upload-Size-Received"] == "1000")
      let missing = try s.send(FirebaseWire.command(url, "upload", offset: nil, body: [1]))
      #expect(missing.status == 400)
      let rest = try s.send(FirebaseWire.command(url, "upload, finalize", offset: 1000, body: Array(content[1000...])))
      #expect(rest.status == 200, "\(rest.text)")
      #expect(try s.snapshot("o.bin")?.bytes == content)
    }
  }

  @Test func chunksMustAgreeWithTheDeclaredLength() throws {
    try withInProcessService { s in
      let url = try s.startSession("l.bin", length: 10)
      let cases: [(String, String, Int, [UInt8], Int)] = [
        ("upload reaching the end", "upload", 0, testBytes(10), 400),
        ("upload past the end", "upload", 0, testBytes(11), 413),
        ("finalize short", "upload, finalize", 0, testBytes(9), 400),
        ("finalize long", "upload, finalize", 0, testBytes(11), 413),
        ("bare finalize early", "finalize", 0, [], 400),
      ]
      for (label, command, offset, body, status) in cases {
        let r = try s.send(FirebaseWire.command(url, command, offset: offset, body: body))
        #expect(r.status == status, "\(label): \(r.status) \(r.text)")
        #expect(try s.send(FirebaseWire.command(url, "query", offset: nil))["X-Goog-Upload-Size-Received"] == "0", "\(label)")
      }
      #expect(try s.snapshot("l.bin") == nil)
      let done = try s.send(FirebaseWire.command(url, "upload, finalize", offset: 0, body: testBytes(10)))
      #expect(done.status == 200, "\(done.text)")
      #expect(try s.snapshot("l.bin")?.bytes == testBytes(10))
    }
  }

  @Test func withoutADeclaredLengthFinalizeEndsIt() throws {
    try withInProcessService { s in
      let url = try s.startSession("d.bin", length: nil)
      let content = testBytes(5000, seed: 9)
      #expect(try s.send(FirebaseWire.command(url, "upload", offset: 0, body: Array(content[..<3000]))).status == 200)
      #expect(try s.send(FirebaseWire.command(url, "upload", offset: 3000, body: Array(content[3000...]))).status == 200)
      let fin = try s.send(FirebaseWire.command(url, "finalize", offset: 5000))
      #expect(fin.status == 200, "\(fin.text)")
      #expect(fin["X-Goog-Upload-Status"] == "final")
      #expect(fin.json?["size"] as? String == "5000")
      #expect(try s.snapshot("d.bin")?.bytes == content)
    }
  }

  @Test func cancelDeletesTheSession() throws {
    try withInProcessService { s in
      let url = try s.startSession("c.bin", length: 100)
      #expect(try s.send(FirebaseWire.command(url, "upload", offset: 0, body: testBytes(50))).status == 200)
      #expect(s.uploadFiles.count == 1)
      let r = try s.send(FirebaseWire.command(url, "cancel", offset: nil))
      #expect(r.status == 200)
      #expect(r["X-Goog-Upload-Status"] == "cancelled")
      #expect(try s.send(FirebaseWire.command(url, "query", offset: nil)).status == 404)
      #expect(s.uploadFiles == [])
      #expect(try s.uploadRows() == 0)
      #expect(try s.snapshot("c.bin") == nil)
    }
  }

  @Test func theUploadURLIsAbsoluteFromPublicURLOrAValidHost() throws {
    try withService(configure: { $0.publicURL = "https://files.example.com/" }) { s in
      let r = try s.send(FirebaseWire.start("p.bin", length: 1))
      let url = try #require(r["X-Goog-Upload-URL"])
      #expect(url.hasPrefix("https://files.example.com/v0/b/app/o?name=p.bin&upload_id="))
      #expect(url.hasSuffix("&upload_protocol=resumable"))
    }
    try withService { s in
      for (label, host) in [("hostile Host", "evil.com/x?"), ("empty Host", ""), ("Host with a space", "a b")] {
        let connection = try WireConnection(port: s.port)
        let body = #"{"name":"h.bin"}"#
        try connection.send(
          "POST /v0/b/app/o?name=h.bin HTTP/1.1\r\nHost: \(host)\r\nX-Goog-Upload-Protocol: resumable\r\n"
            + "X-Goog-Upload-Command: start\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
        let r = try connection.readResponse()
        #expect(r.status == 400, "\(label): \(r.status) \(r.text)")
      }
      #expect(try s.uploadRows() == 0)
      let connection = try WireConnection(port: s.port)
      try connection.send(
        "POST /v0/b/app/o?name=h.bin HTTP/1.1\r\nHost: [::1]:8080\r\nX-Goog-Upload-Protocol: resumable\r\n"
          + "X-Goog-Upload-Command: start\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
      let ok = try connection.readResponse()
      #expect(ok.status == 200, "\(ok.text)")
      #expect(ok["X-Goog-Upload-URL"]?.hasPrefix("http://[::1]:8080/v0/b/app/o?name=h.bin&upload_id=") == true)
    }
  }

  @Test func aSessionBelongsToTheUidThatStartedIt() throws {
    try withInProcessService { s in
      let alice = [("Authorization", "Firebase \(s.service.developmentToken(uid: "alice"))")]
      let url = try s.startSession("a.bin", length: 10, headers: alice)
      // A fresh token of the same uid (the SDK refetches one per request) continues it.
      let fresh = [("Authorization", "Firebase \(s.service.developmentToken(uid: "alice", ttl: 1800))")]
      #expect(try s.send(FirebaseWire.command(url, "upload", offset: 0, body: testBytes(4), extraHeaders: fresh)).status == 200)
      for (label, headers) in [("bob", s.auth("bob")), ("anonymous", [])] {
        for command in ["query", "upload", "upload, finalize", "cancel"] {
          let r = try s.send(
            FirebaseWire.command(url, command, offset: 4, body: command.hasPrefix("upload") ? testBytes(6) : [], extraHeaders: headers))
          #expect(r.status == 404, "\(label) \(command): \(r.status)")
        }
      }
      let q = try s.send(FirebaseWire.command(url, "query", offset: nil, extraHeaders: alice))
      #expect(q["X-Goog-Upload-Size-Received"] == "4")
      #expect(try s.send(FirebaseWire.command(url, "upload, finalize", offset: 4, body: Array(testBytes(10)[4...]), extraHeaders: alice)).status == 200)
      #expect(try s.snapshot("a.bin")?.bytes == testBytes(10))
    }
  }

  @Test func rulesDenyAtStartAndAtFinalize() throws {
    try withInProcessService(policy: .custom(NoPNGPolicy())) { s in
      let early = try s.send(FirebaseWire.start("forbidden.bin", length: 10))
      #expect(early.status == 403, "\(early.text)")
      #expect(try s.uploadRows() == 0)
      #expect(s.uploadFiles == [])
      // Declared as octet-stream, really a PNG: refused on the real bytes; the session ends.
      let url = try s.startSession("pic.bin", length: tinyPNG.count)
      let r = try s.send(FirebaseWire.command(url, "upload, finalize", offset: 0, body: tinyPNG))
      #expect(r.status == 403, "\(r.text)")
      #expect(try s.snapshot("pic.bin") == nil)
      #expect(try s.send(FirebaseWire.command(url, "query", offset: nil)).status == 404)
      #expect(s.uploadFiles == [])
      #expect(try s.rowCounts() == ["objects": 0, "files": 0, "blobs": 0])
    }
  }

  @Test func md5HashIsCheckedAtFinalize() throws {
    try withInProcessService { s in
      let content = testBytes(100)
      let json: [String: Any] = ["name": "m.bin", "md5Hash": Data(Digest.hash(.md5, testBytes(99))).base64EncodedString()]
      let start = try s.send(FirebaseWire.start("m.bin", length: 100, json: json))
      let url = try #require(start["X-Goog-Upload-URL"])
      let r = try s.send(FirebaseWire.command(url, "upload, finalize", offset: 0, body: content))
      #expect(r.status == 400, "\(r.text)")
      #expect(try s.snapshot("m.bin") == nil)
      #expect(try s.rowCounts() == ["objects": 0, "files": 0, "blobs": 0])
    }
  }

  @Test func declaredLengthOverTheLimitIsRefusedAtStart() throws {
    try withInProcessService(configure: { $0.maxUploadSize = 1000 }) { s in
      #expect(try s.send(FirebaseWire.start("big.bin", length: 1001)).status == 413)
      #expect(try s.uploadRows() == 0)
      // Without a declared length the limit stops the bytes.
      let url = try s.startSession("big.bin", length: nil)
      #expect(try s.send(FirebaseWire.command(url, "upload", offset: 0, body: testBytes(1001))).status == 413)
      #expect(try s.send(FirebaseWire.command(url, "query", offset: nil))["X-Goog-Upload-Size-Received"] == "0")
    }
  }

  /// 503 with a retry hint, not tus's 423: the SDKs retry a 5xx with backoff and give up on a
  /// 423, and the holder may be a node that died (its lease runs out).
  @Test func aSecondChunkWhileOneStreamsIsToldToRetry() throws {
    try withService { s in
      let url = try s.startSession("k.bin", length: 3000)
      // The first chunk's head and half its body: it holds the session's lease.
      let first = try WireConnection(port: s.port)
      var request = FirebaseWire.command(url, "upload", offset: 0, body: testBytes(2000))
      try first.send(request.head(closing: true) + Array(testBytes(2000)[..<1000]))
      usleep(200_000)
      let second = try s.send(FirebaseWire.command(url, "upload", offset: 0, body: testBytes(2000)))
      #expect(second.status == 503, "\(second.text)")
      #expect(second["Retry-After"] == "1")
      #expect(second.text.contains("busy"))
      try first.send(Array(testBytes(2000)[1000...]))
      let r = try first.readResponse()
      #expect(r.status == 200, "\(r.text)")
      #expect(r["X-Goog-Upload-Status"] == "active")
      request = FirebaseWire.command(url, "upload, finalize", offset: 2000, body: Array(testBytes(3000)[2000...]))
      #expect(try s.send(request).status == 200)
      #expect(try s.snapshot("k.bin")?.bytes == testBytes(3000))
    }
  }

  @Test func anExpiredSessionIsGone() throws {
    try withInProcessService(configure: { $0.uploadExpiry = .seconds(1) }) { s in
      let url = try s.startSession("e.bin", length: 10)
      #expect(try s.send(FirebaseWire.command(url, "upload", offset: 0, body: testBytes(4))).status == 200)
      usleep(2_100_000)
      #expect(try s.send(FirebaseWire.command(url, "query", offset: nil)).status == 410)
      #expect(try s.send(FirebaseWire.command(url, "upload, finalize", offset: 4, body: testBytes(6))).status == 410)
      #expect(try s.snapshot("e.bin") == nil)
      // The collector reclaims it like any expired tus upload.
      let report = try GarbageCollector(larder: s.service.larder).collect(options: .init(grace: .seconds(0)))
      #expect(report.uploadsExpired == 1)
      #expect(report.uploadBytesFreed == 4)
      #expect(s.uploadFiles == [])
      #expect(try s.uploadRows() == 0)
    }
  }

  @Test func aRestartLosesNothingAcknowledged() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-fb-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    func serve() throws -> LarderService {
      var options = LarderService.Options(dataDirectory: directory, policy: .allowAll)
      options.http.accessLog = .disabled
      let service = try LarderService(options: options.onTestStores())
      try service.start()
      return service
    }
    func send(_ service: LarderService, _ request: WireRequest) throws -> WireResponse {
      let connection = try WireConnection(port: service.port)
      try connection.send(request.bytes(closing: true))
      return try connection.readResponse()
    }
    let content = testBytes(3 * Self.chunk, seed: 12)
    var service = try serve()
    let start = try send(service, try FirebaseWire.start("r.bin", length: content.count))
    let url = try #require(start["X-Goog-Upload-URL"])
    #expect(try send(service, FirebaseWire.command(url, "upload", offset: 0, body: Array(content[..<Self.chunk]))).status == 200)
    // A chunk broken off mid-body is not kept: the SDK resends it whole at the same offset.
    let broken = try WireConnection(port: service.port)
    var partial = FirebaseWire.command(url, "upload", offset: Self.chunk, body: Array(content[Self.chunk..<(2 * Self.chunk)]))
    partial.addLength = false
    partial.headers.append(("Content-Length", String(Self.chunk)))
    try broken.send(partial.head(closing: true) + Array(content[Self.chunk..<(Self.chunk + 1000)]))
    usleep(200_000)
    broken.abort()
    service.stop()
    service = try serve()
    defer { service.stop() }
    let q = try send(service, FirebaseWire.command(url, "query", offset: nil))
    #expect(q.status == 200)
    #expect(q["X-Goog-Upload-Status"] == "active")
    #expect(q["X-Goog-Upload-Size-Received"] == String(Self.chunk))
    #expect(try send(service, FirebaseWire.command(url, "upload", offset: Self.chunk, body: Array(content[Self.chunk..<(2 * Self.chunk)]))).status == 200)
    let last = try send(service, FirebaseWire.command(url, "upload, finalize", offset: 2 * Self.chunk, body: Array(content[(2 * Self.chunk)...])))
    #expect(last.status == 200, "\(last.text)")
    #expect(last.json?["sha256"] as? String == sha256Hex(content))
    #expect(try send(service, .get("/v0/b/app/o/r.bin?alt=media")).body == content)
  }
}
