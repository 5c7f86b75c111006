import Foundation
import Testing

/// `Range`, conditional requests and `maxSize` on `?alt=media`, byte for byte.
@Suite struct RangeAndConditionalTests {
  static let content = Array("0123456789abcdefghij".utf8)
  static let etag = "\"6bc14bdc4517a7a682c6910de2e2946eb8e1ecd04090728fef6d092a7ceb62c5\""
  static let media = "/v0/b/app/o/r.txt?alt=media"

  func ranged(_ s: some ServiceHarness, _ range: String, target: String = media, method: String = "GET") throws -> WireResponse {
    try s.send(.init(method, target, headers: [("Range", range)]))
  }

  @Test func satisfiableRanges() throws {
    try withService { s in
      // Declared, so downloads are labelled with it (the declared type, as Firebase serves it).
      try s.upload("r.txt", Self.content, headers: [("Content-Type", "text/plain")])
      #expect(sha256Hex(Self.content) == String(Self.etag.dropFirst().dropLast()))
      let cases: [(String, String, String)] = [
        ("bytes=0-0", "0", "bytes 0-0/20"),
        ("bytes=19-19", "j", "bytes 19-19/20"),
        ("bytes=19-", "j", "bytes 19-19/20"),
        ("bytes=-5", "fghij", "bytes 15-19/20"),
        ("bytes=-1", "j", "bytes 19-19/20"),
        ("bytes=-20", "0123456789abcdefghij", "bytes 0-19/20"),
        ("bytes=-100", "0123456789abcdefghij", "bytes 0-19/20"),
        ("bytes=15-", "fghij", "bytes 15-19/20"),
        ("bytes=0-", "0123456789abcdefghij", "bytes 0-19/20"),
        ("bytes=5-9", "56789", "bytes 5-9/20"),
        ("bytes=5-100", "56789abcdefghij", "bytes 5-19/20"),
        ("bytes=0-99999999999999999999", "0123456789abcdefghij", "bytes 0-19/20"),
        ("bytes=-99999999999999999999", "0123456789abcdefghij", "bytes 0-19/20"),
      ]
      for (range, body, contentRange) in cases {
        let r = try ranged(s, range)
        #expect(r.status == 206, "\(range)")
        #expect(r.text == body, "\(range)")
        #expect(r["Content-Range"] == contentRange, "\(range)")
        #expect(r["Content-Length"] == String(body.utf8.count), "\(range)")
        #expect(r["ETag"] == Self.etag, "\(range)")
        #expect(r["Content-Type"] == "text/plain", "\(range)")
      }
      let h = try ranged(s, "bytes=-5", method: "HEAD")
      #expect(h.status == 206)
      #expect(h.body.isEmpty)
      #expect(h["Content-Length"] == "5")
      #expect(h["Content-Range"] == "bytes 15-19/20")
    }
  }

  @Test func unsatisfiableRanges() throws {
    try withService { s in
      try s.upload("r.txt", Self.content)
      try s.upload("empty", [])
      for range in ["bytes=20-", "bytes=20-25", "bytes=100-200", "bytes=-0", "bytes=99999999999999999999999-"] {
        let r = try ranged(s, range)
        #expect(r.status == 416, "\(range)")
        #expect(r["Content-Range"] == "bytes */20", "\(range)")
        #expect(r.error?["code"] as? Int == 416, "\(range)")
        #expect(!r.text.contains("0123456789"), "\(range)")
      }
      for range in ["bytes=0-0", "bytes=-5", "bytes=0-"] {
        let r = try ranged(s, range, target: "/v0/b/app/o/empty?alt=media")
        #expect(r.status == 416, "\(range)")
        #expect(r["Content-Range"] == "bytes */0", "\(range)")
      }
      let whole = try s.send(.get("/v0/b/app/o/empty?alt=media"))
      #expect(whole.status == 200)
      #expect(whole.body.isEmpty)
      #expect(whole["Content-Length"] == "0")
      #expect(whole["ETag"] == "\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"")
    }
  }

  @Test func ignoredRangesServeEverything() throws {
    try withService { s in
      try s.upload("r.txt", Self.content)
      // Malformed or multiple ranges: RFC 9110 lets a server ignore Range; 200 with all bytes.
      for range in ["bytes=abc", "bytes=5-3", "items=0-1", "bytes=", "bytes=--1", "bytes 0-1", "bytes=1-2-3", "bytes=0-1,3-4", "bytes=-5,0-0", "bytes=0x1-2", "bytes=+1-2"] {
        let r = try ranged(s, range)
        #expect(r.status == 200, "\(range)")
        #expect(r.body == Self.content, "\(range)")
        #expect(r["Content-Range"] == nil, "\(range)")
      }
    }
  }

  @Test func conditionalRequests() throws {
    try withInProcessService { s in
      try s.upload("r.txt", Self.content)
      let plain = try s.send(.get(Self.media))
      let lastModified = try #require(plain["Last-Modified"])
      let past = "Sun, 06 Nov 1994 08:49:37 GMT"
      let future = "Fri, 01 Jan 2100 00:00:00 GMT"
      let other = "\"0000000000000000000000000000000000000000000000000000000000000000\""

      func check(_ headers: [(String, String)], _ status: Int, _ body: [UInt8]?, _ label: String) throws {
        let r = try s.send(.get(Self.media, headers))
        #expect(r.status == status, "\(label)")
        if let body { #expect(r.body == body, "\(label)") }
        if status == 304 {
          #expect(r["ETag"] == Self.etag, "\(label)")
          #expect(r.body.isEmpty, "\(label)")
        }
      }
      try check([("If-None-Match", Self.etag)], 304, [], "INM match")
      try check([("If-None-Match", "W/" + Self.etag)], 304, [], "INM weak")
      try check([("If-None-Match", "\(other), \(Self.etag)")], 304, [], "INM list")
      try check([("If-None-Match", "*")], 304, [], "INM star")
      try check([("If-None-Match", other)], 200, Self.content, "INM mismatch")
      try check([("If-Match", other)], 412, nil, "IM mismatch")
      try check([("If-Match", Self.etag)], 200, Self.content, "IM match")
      try check([("If-Match", "W/" + Self.etag)], 412, nil, "IM weak never matches")
      try check([("If-Match", "*")], 200, Self.content, "IM star")
      try check([("If-Modified-Since", future)], 304, [], "IMS future")
      try check([("If-Modified-Since", lastModified)], 304, [], "IMS equal")
      try check([("If-Modified-Since", past)], 200, Self.content, "IMS past")
      try check([("If-Modified-Since", "yesterday")], 200, Self.content, "IMS invalid date ignored")
      try check([("If-Unmodified-Since", past)], 412, nil, "IUS past")
      try check([("If-Unmodified-Since", future)], 200, Self.content, "IUS future")
      // If-None-Match takes precedence over If-Modified-Since (RFC 9110 §13.2.2).
      try check([("If-None-Match", other), ("If-Modified-Since", future)], 200, Self.content, "INM over IMS")
      try check([("If-Range", Self.etag), ("Range", "bytes=0-3")], 206, Array("0123".utf8), "If-Range match")
      try check([("If-Range", other), ("Range", "bytes=0-3")], 200, Self.content, "If-Range mismatch")
      try check([("If-Range", lastModified), ("Range", "bytes=0-3")], 206, Array("0123".utf8), "If-Range date")
      try check([("If-Range", past), ("Range", "bytes=0-3")], 200, Self.content, "If-Range old date")
      let failed = try s.send(.get(Self.media, [("If-Match", other)]))
      #expect(failed.error?["code"] as? Int == 412)
      #expect(failed.error?["status"] as? String == "FAILED_PRECONDITION")
    }
  }

  @Test func maxSizeCapsDownloads() throws {
    try withInProcessService { s in
      try s.upload("r.txt", Self.content)
      for n in [20, 21, 1_000_000] {
        let r = try s.send(.get(Self.media + "&maxSize=\(n)"))
        #expect(r.status == 200, "\(n)")
        #expect(r.body == Self.content)
      }
      for n in [19, 0] {
        let r = try s.send(.get(Self.media + "&maxSize=\(n)"))
        #expect(r.status == 413, "\(n)")
        let e = try #require(r.error)
        #expect(e["code"] as? Int == 413)
        #expect(e["size"] as? Int == 20)
        #expect(e["maxSize"] as? Int == n)
        #expect(r["Content-Type"] == "application/json; charset=utf-8")
        #expect(r["Content-Range"] == nil)
        #expect(!r.text.contains("0123456789"))
      }
      // With a Range the cap applies to the range's length.
      let fits = try s.send(.get(Self.media + "&maxSize=10", [("Range", "bytes=0-9")]))
      #expect(fits.status == 206)
      #expect(fits.text == "0123456789")
      let over = try s.send(.get(Self.media + "&maxSize=9", [("Range", "bytes=0-9")]))
      #expect(over.status == 413)
      #expect(over.error?["size"] as? Int == 10)
      #expect(over.error?["maxSize"] as? Int == 9)
      for bad in ["-1", "abc", "1e3", "", "99999999999999999999", "+5", "0x10"] {
        let r = try s.send(.get(Self.media + "&maxSize=\(enc(bad))"))
        #expect(r.status == 400, "\(bad)")
        #expect(r.error?["code"] as? Int == 400, "\(bad)")
      }
    }
  }
}
