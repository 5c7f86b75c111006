import Foundation
import Larder
import LarderCrypto
import LarderServer
import Testing

/// `uploadBytes` / `uploadString`: `X-Goog-Upload-Protocol: multipart` against a live server.
@Suite struct FirebaseMultipartUploadTests {
  @Test func sdkShapedUploadStoresTheContentAndAnswers200WithMetadata() throws {
    try withInProcessService { s in
      let content = Array("hello from the Firebase SDK\n".utf8)
      let json: [String: Any] = [
        "name": "docs/hello world #?&=+%.txt", "contentType": "text/plain",
        "metadata": ["Owner": "Ada", "camelCaseKey": "v", "lower": "x"],
        "cacheControl": "public, max-age=60", "contentDisposition": "inline; filename=\"h.txt\"",
        "md5Hash": Data(Digest.hash(.md5, content)).base64EncodedString(),
      ]
      let r = try s.send(FirebaseWire.multipart("docs/hello world #?&=+%.txt", content: content, json: json))
      #expect(r.status == 200, "\(r.text)")
      let meta = try #require(r.json)
      #expect(meta["name"] as? String == "docs/hello world #?&=+%.txt")
      #expect(meta["bucket"] as? String == "app")
      #expect(meta["size"] as? String == String(content.count))
      #expect(meta["sha256"] as? String == sha256Hex(content))
      #expect(meta["md5Hash"] as? String == Data(Digest.hash(.md5, content)).base64EncodedString())
      #expect(meta["contentType"] as? String == "text/plain")
      #expect(meta["metadata"] as? [String: String] == ["Owner": "Ada", "camelCaseKey": "v", "lower": "x"])
      #expect(meta["cacheControl"] as? String == "public, max-age=60")
      #expect(meta["contentDisposition"] as? String == "inline; filename=\"h.txt\"")
      #expect((meta["downloadTokens"] as? String)?.isEmpty == false)
      let stored = try s.send(.get("/v0/b/app/o/\(enc("docs/hello world #?&=+%.txt"))?alt=media"))
      #expect(stored.status == 200)
      #expect(stored.body == content)
      #expect(stored["Cache-Control"] == "public, max-age=60")
      #expect(try s.rowCounts() == ["objects": 1, "files": 1, "blobs": 1])
      #expect(s.tmpEntries() == [])
    }
  }

  @Test func largeContentWithDelimiterLookalikesStreamsExactly() throws {
    try withService { s in
      var content = testBytes(3 << 20, seed: 11)
      // Near-delimiters at chunk-ish boundaries inside the content.
      for at in stride(from: 1000, to: content.count - 64, by: 65_531) {
        content.replaceSubrange(at..<(at + 23), with: Array("\r\n--\(FirebaseWire.boundary.dropLast())".utf8))
      }
      let r = try s.send(FirebaseWire.multipart("big.bin", content: content, contentType: "application/octet-stream"))
      #expect(r.status == 200, "\(r.text)")
      #expect(r.json?["size"] as? String == String(content.count))
      #expect(r.json?["sha256"] as? String == sha256Hex(content))
      #expect(try s.send(.get("/v0/b/app/o/big.bin?alt=media")).body == content)
    }
  }

  @Test func emptyContentIsAZeroByteObject() throws {
    try withInProcessService { s in
      let r = try s.send(FirebaseWire.multipart("empty.txt", content: []))
      #expect(r.status == 200, "\(r.text)")
      #expect(r.json?["size"] as? String == "0")
      #expect(r.json?["sha256"] as? String == sha256Hex([]))
    }
  }

  @Test func md5HashMustMatchTheContent() throws {
    try withInProcessService { s in
      let content = Array("checked".utf8)
      for (label, md5) in [("wrong", Data(Digest.hash(.md5, Array("other".utf8))).base64EncodedString()), ("malformed", "nope")] {
        let json: [String: Any] = ["name": "m.txt", "contentType": "text/plain", "md5Hash": md5]
        let r = try s.send(FirebaseWire.multipart("m.txt", content: content, json: json))
        #expect(r.status == 400, "\(label): \(r.status) \(r.text)")
        #expect(r.error?["status"] as? String == "INVALID_ARGUMENT")
      }
      #expect(try s.rowCounts() == ["objects": 0, "files": 0, "blobs": 0])
      #expect(s.tmpEntries() == [])
    }
  }

  @Test func contentOverTheLimitIs413AndNothingStored() throws {
    try withInProcessService(configure: { $0.maxUploadSize = 1000 }) { s in
      let r = try s.send(FirebaseWire.multipart("big.bin", content: testBytes(1500)))
      #expect(r.status == 413, "\(r.text)")
      let fits = try s.send(FirebaseWire.multipart("fits.bin", content: testBytes(1000)))
      #expect(fits.status == 200, "\(fits.text)")
      #expect(try s.rowCounts() == ["objects": 1, "files": 1, "blobs": 1])
      #expect(s.tmpEntries() == [])
    }
  }

  @Test func rulesDecideOnTheDeclaredThenOnTheRealContent() throws {
    try withInProcessService(policy: .custom(NoPNGPolicy())) { s in
      // Denied on the name before a content byte is stored.
      let early = try s.send(FirebaseWire.multipart("forbidden.txt", content: Array("x".utf8)))
      #expect(early.status == 403, "\(early.text)")
      // Declared as text, really a PNG: denied on the real bytes, nothing visible.
      let late = try s.send(FirebaseWire.multipart("pic.txt", content: tinyPNG, contentType: "text/plain"))
      #expect(late.status == 403, "\(late.text)")
      #expect(try s.send(.get("/v0/b/app/o/pic.txt")).status == 404)
      #expect(try s.rowCounts() == ["objects": 0, "files": 0, "blobs": 0])
      #expect(s.tmpEntries() == [])
    }
  }

  @Test func ifGenerationMatchIsHonoured() throws {
    try withInProcessService { s in
      let first = try s.send(FirebaseWire.multipart("g.txt", content: Array("one".utf8)))
      let generation = try #require(first.json?["generation"] as? String)
      var stale = try FirebaseWire.multipart("g.txt", content: Array("two".utf8))
      stale.target += "&ifGenerationMatch=1"
      #expect(try s.send(stale).status == 412)
      var fresh = try FirebaseWire.multipart("g.txt", content: Array("two".utf8))
      fresh.target += "&ifGenerationMatch=\(generation)"
      #expect(try s.send(fresh).status == 200)
      #expect(try s.snapshot("g.txt")?.bytes == Array("two".utf8))
    }
  }
}
