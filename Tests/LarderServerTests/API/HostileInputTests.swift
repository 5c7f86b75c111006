import Foundation
import LarderHTTP
import Testing

/// What a hostile or broken client sends: every answer is a 4xx JSON error, and the server keeps serving.
@Suite struct HostileInputTests {
  func expectJSONError(_ r: WireResponse, _ status: Int, _ label: String) {
    #expect(r.status == status, "\(label): \(r.text.prefix(200))")
    #expect(r.error?["code"] as? Int == status, "\(label)")
    #expect(r["Content-Type"] == "application/json; charset=utf-8", "\(label)")
  }

  @Test func badNamesAreRefused() throws {
    try withService { s in
      try s.upload("ok", [1])
      let long = String(repeating: "a", count: 10_000)
      let names = [
        "%zz", "a%2", "%", "%e9", "a%C3", "%ff%fe", "%00", "a%00b", "%0A", "a%0Db", "%1F", "%7F", "%C2%85",
        "a%2F..%2Fb", "..", "%2E%2E", ".", "a%2F.%2Fb", long,
      ]
      for raw in names {
        expectJSONError(try s.send(.get("/v0/b/app/o/\(raw)")), 400, "GET \(raw.prefix(20))")
        expectJSONError(try s.send(.get("/v0/b/app/o/\(raw)?alt=media")), 400, "media \(raw.prefix(20))")
        expectJSONError(try s.send(.init("DELETE", "/v0/b/app/o/\(raw)")), 400, "DELETE \(raw.prefix(20))")
        let up = try WireConnection(port: s.port)
        try up.send(WireRequest("POST", "/v0/b/app/o?name=\(raw)", body: [1, 2]).head(closing: true))
        expectJSONError(try up.readResponse(), 400, "POST \(raw.prefix(20))")
      }
      // Bad bucket names.
      for bucket in ["UPPER", "%zz", "a%00", "-x", String(repeating: "b", count: 300)] {
        expectJSONError(try s.send(.get("/v0/b/\(bucket)/o/ok")), 400, "bucket \(bucket.prefix(20))")
      }
      // Nothing was stored by any of it.
      let list = try #require(try s.send(.get("/v0/b/app/o")).json)
      #expect((list["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["ok"])
      #expect(s.tmpEntries() == [])
    }
  }

  @Test func missingNameAndLength() throws {
    try withService { s in
      let c = try WireConnection(port: s.port)
      try c.send(WireRequest("POST", "/v0/b/app/o", body: [1, 2, 3]).head(closing: true))
      expectJSONError(try c.readResponse(), 400, "no name")
      let c2 = try WireConnection(port: s.port)
      try c2.send(WireRequest("POST", "/v0/b/app/o?name=", body: [1, 2, 3]).head(closing: true))
      expectJSONError(try c2.readResponse(), 400, "empty name")
      // HTTP/1.0 without Content-Length: the length is required.
      let c3 = try WireConnection(port: s.port)
      try c3.send("POST /v0/b/app/o?name=nolen HTTP/1.0\r\nHost: x\r\n\r\n")
      let r3 = try c3.readResponse()
      #expect(r3.status == 411)
      #expect(r3.error?["code"] as? Int == 411)
      #expect(try s.send(.get("/v0/b/app/o/nolen")).status == 404)
      // A Content-Length that is not a number.
      let c4 = try WireConnection(port: s.port)
      try c4.send("POST /v0/b/app/o?name=x HTTP/1.1\r\nHost: x\r\nContent-Length: 1e3\r\nConnection: close\r\n\r\n")
      let r4 = try c4.readResponse()
      #expect((400..<500).contains(r4.status))
      #expect(try s.send(.get("/v0/b/app/o/x")).status == 404)
      // uploadType other than media.
      let c5 = try WireConnection(port: s.port)
      try c5.send(WireRequest("POST", "/v0/b/app/o?name=y&uploadType=multipart", body: [1]).head(closing: true))
      expectJSONError(try c5.readResponse(), 400, "uploadType")
    }
  }

  @Test func hugeHeaderIsRefusedAndServerSurvives() throws {
    try withService { s in
      let c = try WireConnection(port: s.port)
      let huge = String(repeating: "x", count: 64 * 1024)
      try? c.send("GET /v0/b/app/o HTTP/1.1\r\nHost: x\r\nX-Huge: \(huge)\r\nConnection: close\r\n\r\n")
      let r = try c.readResponse()
      #expect((400..<500).contains(r.status), "status \(r.status)")
      // Many medium headers, over the 16 KiB header budget but within the connection's 64 KiB buffer.
      var many = "GET /v0/b/app/o HTTP/1.1\r\nHost: x\r\n"
      for i in 0..<40 { many += "X-Pad-\(i): \(String(repeating: "p", count: 500))\r\n" }
      let c2 = try WireConnection(port: s.port)
      try c2.send(many + "Connection: close\r\n\r\n")
      let r2 = try c2.readResponse()
      #expect(r2.status == 431)
      #expect(try s.send(.get("/healthz")).status == 200)
    }
  }

  @Test func unknownMethodsGet405WithAllow() throws {
    try withInProcessService { s in
      try s.upload("m", [1, 2, 3])
      let r = try s.send(.init("BREW", "/v0/b/app/o/m"))
      expectJSONError(r, 405, "BREW object")
      #expect(r["Allow"] == "GET, HEAD, PATCH, DELETE, OPTIONS")
      let put = try s.send(.init("PUT", "/v0/b/app/o/m", body: [9]))
      #expect(put.status == 405)
      let r2 = try s.send(.init("BREW", "/v0/b/app/o"))
      expectJSONError(r2, 405, "BREW collection")
      #expect(r2["Allow"] == "GET, POST, OPTIONS")
      let d = try s.send(.init("DELETE", "/v0/b/app/o"))
      #expect(d.status == 405)
      #expect(try s.send(.get("/v0/b/app/o/m?alt=media")).body == [1, 2, 3])
      // Unknown paths are 404 JSON.
      expectJSONError(try s.send(.get("/nope")), 404, "unknown path")
      expectJSONError(try s.send(.get("/v0/b/app/x/m")), 404, "unknown collection")
      expectJSONError(try s.send(.get("/v0/b/app/o/a/b")), 404, "unencoded slash")
    }
  }
}
