import Foundation
import Larder
import LarderServer
import Testing

/// "Never again": a request naming an upload protocol or command Larder does not implement, or a
/// body it cannot parse, is a 400 JSON error and changes nothing (the object keeps its bytes
/// and generation, no blob, file or upload session appears).
@Suite struct FirebaseRefusalTests {
  static let original = Array("the original bytes".utf8)

  func expectRefused(_ s: some ServiceHarness, _ label: String, _ request: WireRequest, status: Int = 400) throws {
    let before = try #require(try s.snapshot("target.txt"))
    let counts = try s.rowCounts()
    let r = try s.send(request)
    #expect(r.status == status, "\(label): \(r.status) \(r.text)")
    #expect(r["Content-Type"]?.hasPrefix("application/json") == true, "\(label)")
    #expect(r.error?["code"] as? Int == status, "\(label): \(r.text)")
    #expect((r.error?["message"] as? String)?.isEmpty == false, "\(label)")
    let after = try #require(try s.snapshot("target.txt"))
    #expect(after.bytes == Self.original, "\(label): bytes changed")
    #expect(after.generation == before.generation, "\(label): generation changed")
    #expect(try s.rowCounts() == counts, "\(label): rows changed")
    #expect(try s.uploadRows() == 0, "\(label): a session was created")
    #expect(s.uploadFiles == [], "\(label)")
    #expect(s.tmpEntries() == [], "\(label)")
  }

  static func post(_ headers: [(String, String)], query: String = "", body: [UInt8] = Array("would-be bytes".utf8))
    -> WireRequest
  {
    WireRequest("POST", "/v0/b/app/o?name=target.txt\(query)", headers: headers, body: body)
  }

  @Test func unknownProtocolsAndCommandsAreRefused() throws {
    try withInProcessService { s in
      try s.upload("target.txt", Self.original)
      let cases: [(String, WireRequest)] = [
        ("protocol raw", Self.post([("X-Goog-Upload-Protocol", "raw")])),
        ("protocol bogus", Self.post([("X-Goog-Upload-Protocol", "bogus")])),
        ("empty protocol", Self.post([("X-Goog-Upload-Protocol", "")])),
        ("command bogus", Self.post([("X-Goog-Upload-Protocol", "resumable"), ("X-Goog-Upload-Command", "bogus")])),
        ("command without protocol", Self.post([("X-Goog-Upload-Command", "upload, finalize"), ("X-Goog-Upload-Offset", "0")])),
        ("resumable without command", Self.post([("X-Goog-Upload-Protocol", "resumable")])),
        ("start, upload", Self.post([("X-Goog-Upload-Protocol", "resumable"), ("X-Goog-Upload-Command", "start, upload")])),
        ("multipart with a command", Self.post([("X-Goog-Upload-Protocol", "multipart"), ("X-Goog-Upload-Command", "start")])),
        ("upload_id without command", Self.post([], query: "&upload_id=0123456789abcdef0123456789abcdef")),
        ("upload_protocol other", Self.post([], query: "&upload_protocol=multipart")),
        ("uploadType with protocol", Self.post([("X-Goog-Upload-Protocol", "multipart")], query: "&uploadType=media")),
        ("start with an upload_id", Self.post([("X-Goog-Upload-Protocol", "resumable"), ("X-Goog-Upload-Command", "start")], query: "&upload_id=0123456789abcdef0123456789abcdef")),
      ]
      for (label, request) in cases { try expectRefused(s, label, request) }
    }
  }

  @Test func malformedMultipartBodiesAreRefused() throws {
    try withInProcessService { s in
      try s.upload("target.txt", Self.original)
      let b = FirebaseWire.boundary
      let json = #"{"name":"target.txt","contentType":"text/plain"}"#
      func multipart(_ body: String, contentType: String = "multipart/related; boundary=\(b)") -> WireRequest {
        Self.post([("X-Goog-Upload-Protocol", "multipart"), ("Content-Type", contentType)], body: Array(body.utf8))
      }
      let good = "--\(b)\r\nContent-Type: application/json\r\n\r\n\(json)\r\n--\(b)\r\nContent-Type: text/plain\r\n\r\nNEW\r\n--\(b)--"
      let cases: [(String, WireRequest)] = [
        ("no boundary", multipart(good, contentType: "multipart/related")),
        ("not multipart/related", multipart(good, contentType: "application/octet-stream")),
        ("no Content-Type", Self.post([("X-Goog-Upload-Protocol", "multipart")], body: Array(good.utf8))),
        ("raw bytes", multipart("NEW")),
        ("empty body", multipart("")),
        ("metadata only", multipart("--\(b)\r\nContent-Type: application/json\r\n\r\n\(json)\r\n--\(b)--")),
        ("wrong order", multipart("--\(b)\r\nContent-Type: text/plain\r\n\r\nNEW\r\n--\(b)\r\nContent-Type: application/json\r\n\r\n\(json)\r\n--\(b)--")),
        ("trailing garbage", multipart(good + "garbage")),
        ("no closing delimiter", multipart(String(good.dropLast(b.count + 4)))),
        ("three parts", multipart(String(good.dropLast(2)) + "\r\n\r\nMORE\r\n--\(b)--")),
        ("name differs", multipart(good.replacingOccurrences(of: #""name":"target.txt""#, with: #""name":"other.txt""#))),
        ("JSON not an object", multipart(good.replacingOccurrences(of: json, with: "[1,2]"))),
        ("JSON broken", multipart(good.replacingOccurrences(of: json, with: "{\"name\":"))),
        ("metadata value not a string", multipart(good.replacingOccurrences(of: json, with: #"{"name":"target.txt","metadata":{"n":1}}"#))),
        ("contentType not a string", multipart(good.replacingOccurrences(of: json, with: #"{"name":"target.txt","contentType":7}"#))),
      ]
      for (label, request) in cases { try expectRefused(s, label, request) }
      // The name in the JSON is also what is written when ?name= is absent: still checked.
      var noQuery = multipart(good)
      noQuery.target = "/v0/b/app/o"
      let r = try s.send(noQuery)
      #expect(r.status == 200, "\(r.text)")
      #expect(try s.snapshot("target.txt")?.bytes == Array("NEW".utf8))
    }
  }

  @Test func resumableStartBodiesAndHeadersMustParse() throws {
    try withInProcessService { s in
      try s.upload("target.txt", Self.original)
      let start = [("X-Goog-Upload-Protocol", "resumable"), ("X-Goog-Upload-Command", "start")]
      let cases: [(String, WireRequest, Int)] = [
        ("JSON broken", Self.post(start, body: Array("{".utf8)), 400),
        ("JSON array", Self.post(start, body: Array("[]".utf8)), 400),
        ("name differs", Self.post(start, body: Array(#"{"name":"x.txt"}"#.utf8)), 400),
        ("length not a number", Self.post(start + [("X-Goog-Upload-Header-Content-Length", "12a")], body: Array("{}".utf8)), 400),
        ("negative length", Self.post(start + [("X-Goog-Upload-Header-Content-Length", "-1")], body: Array("{}".utf8)), 400),
        ("bad md5Hash", Self.post(start, body: Array(#"{"md5Hash":"nope"}"#.utf8)), 400),
        ("JSON over 64 KiB", Self.post(start, body: Array(("{\"a\":\"" + String(repeating: "x", count: 70_000) + "\"}").utf8)), 413),
      ]
      for (label, request, status) in cases { try expectRefused(s, label, request, status: status) }
    }
  }

  @Test func sessionCommandsOnUnknownSessionsChangeNothing() throws {
    try withInProcessService { s in
      try s.upload("target.txt", Self.original)
      for command in ["upload", "upload, finalize", "query", "finalize", "cancel"] {
        let r = try s.send(
          FirebaseWire.command(
            "/v0/b/app/o?name=target.txt&upload_id=0123456789abcdef0123456789abcdef&upload_protocol=resumable",
            command, offset: 0, body: command.hasPrefix("upload") ? Array("x".utf8) : []))
        #expect(r.status == 404, "\(command): \(r.status) \(r.text)")
        let bogus = try s.send(FirebaseWire.command("/v0/b/app/o?name=target.txt&upload_id=..%2F..%2Fsecret", command, offset: 0))
        #expect(bogus.status == 404, "\(command) with a hostile id: \(bogus.status)")
      }
      #expect(try s.snapshot("target.txt")?.bytes == Self.original)
    }
  }
}
