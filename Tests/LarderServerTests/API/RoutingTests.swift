import Foundation
import Larder
import LarderHTTP
import LarderLogging
import LarderServer
import LarderTestSupport
import Testing

/// The one route table: fixed labels, trailing slashes on collections, one CORS wrapper, one
/// error seam that logs what it does not send.
@Suite struct RoutingTests {
  /// The `route="…"` labels of a Prometheus text.
  static func labels(_ metrics: String) -> Set<String> {
    var out = Set<String>()
    for line in metrics.split(separator: "\n") where !line.hasPrefix("#") {
      guard let start = line.range(of: "route=\"") else { continue }
      let rest = line[start.upperBound...]
      if let end = rest.firstIndex(of: "\"") { out.insert(String(rest[..<end])) }
    }
    return out
  }

  @Test func methodOverridesNeverAddLabels() throws {
    try withService { s in
      #expect(try s.send(.get("/no/such/path")).status == 404)
      _ = try s.send(.get("/metrics"))
      var before = try s.send(.get("/metrics"))
      _ = pollUntil {
        before = (try? s.send(.get("/metrics"))) ?? before
        return before.text.contains(#"larder_http_requests_total{route="metrics",status="200"} "#)
          && before.text.contains(#"larder_http_requests_total{route="unmatched",status="404"} 1"#)
      }
      let labelsBefore = Self.labels(before.text)
      #expect(labelsBefore == ["metrics", "unmatched"])
      for i in 0..<50 {
        let r = try s.send(
          .init(
            "POST", "/v0/b/app/uploads",
            headers: [
              ("Tus-Resumable", "1.0.0"), ("X-HTTP-Method-Override", "CRAFTED-\(i)"), ("Upload-Length", "1"),
            ]))
        #expect(r.status == 405)
        #expect(r.error?["code"] as? Int == 405)
        #expect(r["Allow"] == "POST, OPTIONS")
      }
      var after = try s.send(.get("/metrics"))
      _ = pollUntil {
        after = (try? s.send(.get("/metrics"))) ?? after
        return after.text.contains(#"larder_http_requests_total{route="unmatched",status="405"} 50"#)
      }
      #expect(after.text.contains(#"larder_http_requests_total{route="unmatched",status="405"} 50"# + "\n"))
      #expect(Self.labels(after.text) == labelsBefore)
      #expect(!after.text.contains("crafted") && !after.text.contains("CRAFTED"))
    }
  }

  @Test func knownMethodOverridesReachTheirFixedRoutes() throws {
    let h = try InProcessService()
    let path = try h.create(length: 2)
    // A client that can only POST asks for HEAD and PATCH.
    let head = try h.request("POST", path, headers: [TusHarness.tus, ("X-HTTP-Method-Override", "HEAD")])
    #expect(head.status == 200)
    #expect(head["Upload-Offset"] == "0")
    let patch = try h.request(
      "POST", path,
      headers: [
        TusHarness.tus, TusHarness.stream, ("Upload-Offset", "0"), ("X-HTTP-Method-Override", "patch"),
      ],
      body: [7, 8])
    #expect(patch.status == 204)
    #expect(patch["Upload-Offset"] == "2")
    #expect(try h.objectBytes("file.bin").body == [7, 8])
  }

  @Test func trailingSlashTusEndpointCreatesAnUpload() throws {
    let h = try InProcessService()
    let r = try h.request(
      "POST", "/v0/b/app/uploads/",
      headers: [
        TusHarness.tus, ("Upload-Length", "3"),
        ("Upload-Metadata", TusHarness.metadata([("name", "slash.bin")])),
      ])
    #expect(r.status == 201)
    let location = try #require(r["Location"])
    #expect(location.hasPrefix("/v0/b/app/uploads/") && location.count == "/v0/b/app/uploads/".count + 32)
    #expect(try h.patch(location, offset: 0, [1, 2, 3]).status == 204)
    let object = try h.objectBytes("slash.bin")
    #expect(object.status == 200)
    #expect(object.body == [1, 2, 3])
    // The objects collection, too: listing and uploading with a trailing slash.
    let list = try h.request("GET", "/v0/b/app/o/")
    #expect(list.status == 200)
    #expect((list.json?["items"] as? [[String: Any]])?.map { $0["name"] as? String } == ["slash.bin"])
    let up = try h.request("POST", "/v0/b/app/o/?name=two", body: [4, 5])
    #expect(up.status == 200)
    #expect(try h.objectBytes("two").body == [4, 5])
  }

  static let allowedHeaders =
    "Authorization, Content-Type, Range, If-None-Match, If-Match, X-Goog-Meta-*, X-Goog-Upload-Protocol, "
    + "X-Goog-Upload-Command, X-Goog-Upload-Offset, X-Goog-Upload-Header-Content-Length, "
    + "X-Goog-Upload-Header-Content-Type, X-Firebase-Storage-Version, X-Firebase-GMPID, X-Firebase-AppCheck, "
    + "X-Upload-Content-Type, X-Upload-Content-Length, Content-Range, X-Goog-User-Project, "  // the GCS API's
    + "Tus-Resumable, Upload-Length, Upload-Defer-Length, Upload-Metadata, Upload-Offset, Upload-Checksum, "
    + "Upload-Concat, X-HTTP-Method-Override, X-Request-Id"
  static let exposedHeaders =
    "ETag, Content-Range, Content-Length, Location, X-Goog-Upload-URL, X-Goog-Upload-Status, "
    + "X-Goog-Upload-Size-Received, X-Goog-Upload-Chunk-Granularity, X-Goog-Upload-Control-URL, "
    + "X-Goog-Hash, X-Goog-Generation, X-Goog-Metageneration, X-Goog-Storage-Class, Range, "  // the GCS API's
    + "Upload-Offset, "
    + "Upload-Length, Upload-Metadata, Upload-Defer-Length, Upload-Expires, Upload-Concat, Tus-Resumable, "
    + "Tus-Version, Tus-Extension, Tus-Max-Size, Tus-Checksum-Algorithm, X-Request-Id"

  @Test func corsPreflightListsFirebaseUploadHeaders() throws {
    try withInProcessService(configure: { $0.corsOrigins = ["https://app.example"] }) { s in
      let origin = ("Origin", "https://app.example")
      let p = try s.send(
        .init("OPTIONS", "/v0/b/app/o", headers: [origin, ("Access-Control-Request-Method", "POST")]))
      #expect(p.status == 204)
      #expect(p["Access-Control-Allow-Origin"] == "https://app.example")
      #expect(p["Access-Control-Allow-Methods"] == "GET, HEAD, POST, PATCH, DELETE, OPTIONS")
      #expect(p["Access-Control-Allow-Headers"] == Self.allowedHeaders)
      #expect(p["Access-Control-Max-Age"] == "86400")
      // The tus endpoint's preflight offers the same list: one CORS value.
      let t = try s.send(.init("OPTIONS", "/v0/b/app/uploads/", headers: [origin]))
      #expect(t.status == 200)
      #expect(t["Access-Control-Allow-Headers"] == Self.allowedHeaders)
      // What the browser asks for is echoed, as before.
      let echo = try s.send(
        .init(
          "OPTIONS", "/v0/b/app/o/a",
          headers: [
            origin, ("Access-Control-Request-Headers", "x-goog-upload-protocol, x-goog-upload-command"),
          ]))
      #expect(echo["Access-Control-Allow-Headers"] == "x-goog-upload-protocol, x-goog-upload-command")
      // Every answer exposes the same list, success, error or unmatched.
      try s.upload("a", [1])
      for target in ["/v0/b/app/o/a?alt=media", "/v0/b/app/o/missing", "/nowhere"] {
        let r = try s.send(.get(target, [origin]))
        #expect(r["Access-Control-Allow-Origin"] == "https://app.example", "\(target)")
        #expect(r["Access-Control-Expose-Headers"] == Self.exposedHeaders, "\(target)")
        #expect(r["Vary"] == "Origin", "\(target)")
      }
    }
  }

  struct DenyWithReason: AccessPolicy {
    func decide(_ request: AccessRequest) -> AccessDecision {
      request.operation == .get
        ? .deny("rule at storage.rules:7 said no-secret-\(request.name)") : .allow("ok")
    }
  }

  @Test func denyReasonIsLoggedWithTheRequestIDButNeverSent() throws {
    let log = MemoryLogHandler()
    try withInProcessService(
      policy: .custom(DenyWithReason()), configure: { $0.logger = Logger(label: "test", handler: log) }
    ) { s in
      try s.upload("x", [1, 2])
      let r = try s.send(.get("/v0/b/app/o/x?alt=media", [("X-Request-Id", "req-deny-1")]))
      #expect(r.status == 403)
      #expect(r["X-Request-Id"] == "req-deny-1")
      #expect(r.error?["message"] as? String == "permission denied")
      #expect(!r.text.contains("no-secret") && !r.text.contains("storage.rules"))
      let denials = log.records.filter { $0.metadata["request_id"] == "req-deny-1" }
      #expect(denials.count == 1)
      #expect(denials.first?.message == "access denied")
      #expect(denials.first?.metadata["reason"] == "rule at storage.rules:7 said no-secret-x")
      #expect(denials.first?.metadata["code"] == "permission-denied")
      #expect(denials.first?.level == .info)
    }
  }

  @Test func uploadErrorCodesReachTheLog() throws {
    let log = MemoryLogHandler()
    try withInProcessService(configure: { $0.logger = Logger(label: "test", handler: log) }) { s in
      let create = try s.send(
        .init(
          "POST", "/v0/b/app/uploads",
          headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", "4"), ("Upload-Metadata", "name bg==")]))
      let location = try #require(create["Location"])
      let r = try s.send(
        .init(
          "PATCH", location,
          headers: [
            ("Tus-Resumable", "1.0.0"), ("Content-Type", "application/offset+octet-stream"),
            ("Upload-Offset", "3"),
            ("X-Request-Id", "req-offset-1"),
          ], body: [1]))
      #expect(r.status == 409)
      let records = log.records.filter { $0.metadata["request_id"] == "req-offset-1" }
      #expect(records.map(\.message) == ["upload refused"])
      #expect(records.first?.metadata["code"] == "offset-mismatch")
    }
  }

  @Test func everyRequestGetsOneOfTheDeclaredLabels() throws {
    try withInProcessService { s in
      let tus = ("Tus-Resumable", "1.0.0")
      let cases: [(WireRequest, Int, String)] = [
        (.get("/healthz"), 200, "healthz"),
        (.head("/healthz"), 200, "healthz"),
        (.get("/metrics"), 200, "metrics"),
        (.init("POST", "/v0/b/app/o?name=a", body: [1]), 200, "objects.upload"),
        (.init("POST", "/v0/b/app/o/?name=b", body: [2]), 200, "objects.upload"),
        (.get("/v0/b/app/o"), 200, "objects.list"),
        (.get("/v0/b/app/o/"), 200, "objects.list"),
        (.get("/v0/b/app/o/a"), 200, "objects.get"),
        (.head("/v0/b/app/o/a"), 200, "objects.get"),
        (.get("/v0/b/app/o/a?alt=media"), 200, "objects.download"),
        (.head("/v0/b/app/o/a?alt=media"), 200, "objects.download"),
        (.get("/v0/b/app/o/missing"), 404, "objects.get"),
        (.init("PATCH", "/v0/b/app/o/a", body: Array(#"{"metadata":{"k":"v"}}"#.utf8)), 200, "objects.patch"),
        (.init("DELETE", "/v0/b/app/o/b"), 204, "objects.delete"),
        (.init("OPTIONS", "/v0/b/app/o/a"), 204, "objects.preflight"),
        (.init("OPTIONS", "/v0/b/app/uploads"), 200, "tus.options"),
        (
          .init(
            "POST", "/v0/b/app/uploads/",
            headers: [tus, ("Upload-Length", "1"), ("Upload-Metadata", "name Yw==")]), 201, "tus.create"
        ),
        (
          .init("HEAD", "/v0/b/app/uploads/0123456789abcdef0123456789abcdef", headers: [tus]), 404, "tus.head"
        ),
        (
          .init("PATCH", "/v0/b/app/uploads/0123456789abcdef0123456789abcdef", headers: [tus]), 415,
          "tus.patch"
        ),
        (
          .init("DELETE", "/v0/b/app/uploads/0123456789abcdef0123456789abcdef", headers: [tus]), 404,
          "tus.delete"
        ),
        (.init("POST", "/v0/b/app/uploads", headers: [("X-HTTP-Method-Override", "BREW")]), 405, "unmatched"),
        (.init("BREW", "/v0/b/app/o"), 405, "unmatched"),
        (.get("/v0/b/app/elsewhere"), 404, "unmatched"),
        (.get("/v0/b/BAD/o"), 400, "objects.list"),
      ]
      for (request, status, label) in cases {
        let r = try s.send(request)
        #expect(r.status == status, "\(request.method) \(request.target): \(r.text)")
        #expect(r.route == label, "\(request.method) \(request.target)")
        #expect(s.service.app.router.labels.contains(r.route ?? ""))
      }
      #expect(try s.send(.head("/v0/b/app/o/a?alt=media")).body.isEmpty)
      #expect(try s.send(.get("/v0/b/app/o/a?alt=media")).body == [1])
    }
  }
}
