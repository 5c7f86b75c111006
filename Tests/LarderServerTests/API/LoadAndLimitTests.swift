import Foundation
import Synchronization
import Testing

/// Many clients at once, clients that vanish, and bodies over the limit.
@Suite struct LoadAndLimitTests {
  /// Runs `work(i)` for i in 0..<count, each on its own thread (blocking socket I/O).
  static func inParallel(_ count: Int, _ work: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for i in 0..<count {
      group.enter()
      let t = Thread {
        work(i)
        group.leave()
      }
      t.stackSize = 1 << 20
      t.start()
    }
    group.wait()
  }

  @Test func fiftyConcurrentUploadsAndDownloads() throws {
    try withService { s in
      let sizes = [0, 1, 17, 1000, 65_535, 65_536, 65_537, 300_000, 1 << 20, 8 << 20]
      let port = s.port
      let bodies = (0..<50).map { i in testBytes(sizes[i % sizes.count], seed: UInt64(i + 100)) }
      let expected = bodies.map(sha256Hex)
      let uploaded = Mutex<[Int: String]>([:])
      let failures = Mutex<[String]>([])
      Self.inParallel(50) { i in
        do {
          let c = try WireConnection(port: port)
          try c.send(WireRequest("POST", "/v0/b/load/o?name=f\(i)", body: bodies[i]).bytes(closing: true))
          let r = try c.readResponse()
          guard r.status == 200, let sha = r.json?["sha256"] as? String, r.json?["size"] as? String == String(bodies[i].count)
          else { throw WireFailure.unexpected("upload \(i): \(r.status) \(r.text.prefix(200))") }
          uploaded.withLock { $0[i] = sha }
        } catch {
          failures.withLock { $0.append("\(error)") }
        }
      }
      #expect(failures.withLock { $0 } == [])
      for i in 0..<50 { #expect(uploaded.withLock { $0[i] } == expected[i], "upload \(i)") }

      let downloaded = Mutex<[Int: String]>([:])
      Self.inParallel(50) { i in
        do {
          let c = try WireConnection(port: port)
          try c.send(WireRequest.get("/v0/b/load/o/f\(49 - i)?alt=media").bytes(closing: true))
          let r = try c.readResponse()
          guard r.status == 200 else { throw WireFailure.unexpected("download \(49 - i): \(r.status)") }
          let sha = sha256Hex(r.body)
          downloaded.withLock { $0[49 - i] = sha }
        } catch {
          failures.withLock { $0.append("\(error)") }
        }
      }
      #expect(failures.withLock { $0 } == [])
      for i in 0..<50 { #expect(downloaded.withLock { $0[i] } == expected[i], "download \(i)") }
      #expect(s.tmpEntries() == [])
      // Five empty bodies dedupe to one blob: 46 distinct contents.
      #expect(s.blobFiles().count == 46)
    }
  }

  @Test func clientVanishingMidUploadLeavesNothing() throws {
    try withService { s in
      let c = try WireConnection(port: s.port)
      try c.send(
        WireRequest("POST", "/v0/b/app/o?name=partial", body: testBytes(10 << 20)).head(closing: false))
      try c.send(testBytes(1 << 20))
      // The server must have started the upload (a temp file exists) before we vanish.
      _ = pollUntil(timeout: .seconds(10)) { !s.tmpEntries().isEmpty }
      Glibc.shutdown(c.fd, Int32(SHUT_RDWR))
      let cleaned = pollUntil(timeout: .seconds(10)) { s.tmpEntries().isEmpty }
      let left = s.tmpEntries()
      #expect(cleaned, "temp files left: \(left)")
      let r = try s.send(.get("/v0/b/app/o/partial"))
      #expect(r.status == 404)
      #expect(s.blobFiles() == [])
      // The server still serves.
      try s.upload("after", [1, 2, 3])
      #expect(try s.send(.get("/v0/b/app/o/after?alt=media")).body == [1, 2, 3])
    }
  }

  @Test func bodyOverUploadLimitIsRefusedAndNotStored() throws {
    try withService(configure: { $0.maxUploadSize = 1000 }) { s in
      // Declared too large: refused from the head, before a body byte is read.
      let c = try WireConnection(port: s.port)
      try c.send(WireRequest("POST", "/v0/b/app/o?name=big", body: testBytes(5000)).head(closing: true))
      let r = try c.readResponse()
      #expect(r.status == 413)
      #expect(r.error?["code"] as? Int == 413)

      // Chunked without a length: refused when the limit is crossed.
      var chunked = WireRequest("POST", "/v0/b/app/o?name=big2", headers: [("Transfer-Encoding", "chunked")])
      chunked.addLength = false
      let c2 = try WireConnection(port: s.port)
      var bytes = chunked.head(closing: true)
      for _ in 0..<5 { bytes += Array("3e8\r\n".utf8) + testBytes(1000) + Array("\r\n".utf8) }
      bytes += Array("0\r\n\r\n".utf8)
      try c2.send(bytes)
      let r2 = try c2.readResponse()
      #expect(r2.status == 413)

      // Exactly at the limit is fine; one over is not.
      try s.upload("exact", testBytes(1000))
      let over = try WireConnection(port: s.port)
      try over.send(WireRequest("POST", "/v0/b/app/o?name=over", body: testBytes(1001)).head(closing: true))
      #expect(try over.readResponse().status == 413)

      #expect(pollUntil { s.tmpEntries().isEmpty })
      for name in ["big", "big2", "over"] { #expect(try s.send(.get("/v0/b/app/o/\(name)")).status == 404) }
      #expect(s.blobFiles().count == 1)
      let list = try #require(try s.send(.get("/v0/b/app/o")).json)
      #expect((list["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["exact"])
    }
  }
}
