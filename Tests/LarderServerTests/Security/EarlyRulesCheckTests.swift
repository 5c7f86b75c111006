import Foundation
import Larder
import LarderCrypto
import Testing

/// The early rules check, before the body: a condition that depends on a field not known yet
/// (`md5Hash`, `sha256`, `detectedContentType`, an undeclared size) does not deny there; the
/// check at publish decides it on the real bytes. Known fields still deny before the body.
@Suite struct EarlyRulesCheckTests {
  static let kilobyte: [UInt8] = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

  /// `allow get` and `allow create: if <condition>` on every object.
  func withCreateRule<T>(_ condition: String, _ body: (LiveService) throws -> T) throws -> T {
    let rules = try temporaryRulesFile(
      """
      rules_version = '2';
      service firebase.storage {
        match /b/{bucket}/o {
          match /{name} {
            allow get: if true;
            allow create: if \(condition);
          }
        }
      }
      """)
    defer { try? FileManager.default.removeItem(at: rules) }
    return try withRulesService(rules: rules, body)
  }

  func post(_ s: LiveService, _ name: String, _ body: [UInt8], _ headers: [(String, String)] = []) throws
    -> WireResponse
  {
    try s.send(.init("POST", "/v0/b/app/o?name=\(enc(name))", headers: headers, body: body))
  }

  /// A tus upload of `body` in one PATCH after its creation; the creation's answer on refusal.
  func tusUpload(_ s: LiveService, _ name: String, _ body: [UInt8], deferLength: Bool = false) throws
    -> WireResponse
  {
    var headers = [("Tus-Resumable", "1.0.0"), ("Upload-Metadata", LiveService.metadata([("name", name)]))]
    headers.append(deferLength ? ("Upload-Defer-Length", "1") : ("Upload-Length", String(body.count)))
    let created = try s.request("POST", "/v0/b/app/uploads", headers: headers)
    guard created.status == 201, let location = created["Location"] else { return created }
    let length = deferLength ? [("Upload-Length", String(body.count))] : []
    return try s.patch(location, offset: 0, body, extra: length)
  }

  static let sizeOrMD5 = "request.resource.size < 100 || request.resource.md5Hash != ''"

  /// How a test sends its bytes: one simple POST, or a tus creation and one PATCH.
  enum Route: String, CaseIterable, Sendable {
    case simple, tus
    var success: Int { self == .simple ? 200 : 204 }
  }

  func upload(_ s: LiveService, _ route: Route, _ name: String, _ body: [UInt8]) throws -> WireResponse {
    route == .simple ? try post(s, name, body) : try tusUpload(s, name, body)
  }

  @Test(arguments: Route.allCases)
  func anUploadIsNotDeniedEarlyOnAnMD5NotKnownYet(_ route: Route) throws {
    try withCreateRule(Self.sizeOrMD5) { s in
      for (name, body) in [("k.bin", Self.kilobyte), ("small.bin", Array(Self.kilobyte[..<50]))] {
        let r = try upload(s, route, name, body)
        #expect(r.status == route.success, "\(name): \(r.text)")
        #expect(try s.snapshot(name)?.bytes == body, "\(name)")
      }
    }
  }

  @Test func aDeferredLengthIsNotTakenAsZeroEarly() throws {
    try withCreateRule("request.resource.size > 500") { s in
      let r = try tusUpload(s, "k.bin", Self.kilobyte, deferLength: true)
      #expect(r.status == 204, "\(r.text)")
      #expect(try s.snapshot("k.bin")?.bytes == Self.kilobyte)
      let small = try tusUpload(s, "small.bin", Array(Self.kilobyte[..<50]), deferLength: true)
      #expect(small.status == 403, "\(small.text)")
      #expect(try s.send(.get("/v0/b/app/o/small.bin")).status == 404)
    }
  }

  @Test func theDetectedTypeIsNotTakenFromTheDeclaredOneEarly() throws {
    try withCreateRule("request.resource.detectedContentType == 'image/png'") { s in
      let r = try post(s, "dot.bin", tinyPNG, [("Content-Type", "application/octet-stream")])
      #expect(r.status == 200, "\(r.text)")
      #expect(try s.snapshot("dot.bin")?.bytes == tinyPNG)
      let text = try post(s, "t.png", Self.kilobyte, [("Content-Type", "image/png")])
      #expect(text.status == 403, "\(text.text)")
      #expect(try s.send(.get("/v0/b/app/o/t.png")).status == 404)
    }
  }

  @Test func aWrongMD5IsRefusedAtPublishAndNothingBecomesVisible() throws {
    try withCreateRule("request.resource.md5Hash == 'wrong'") { s in
      let simple = try post(s, "a.bin", Self.kilobyte)
      #expect(simple.status == 403, "\(simple.text)")
      #expect(simple.error?["status"] as? String == "PERMISSION_DENIED")
      // Not denied before the body: the creation passes, the last byte is refused.
      let upload = try s.create(length: Self.kilobyte.count, name: "b.bin")
      let tus = try s.patch(upload, offset: 0, Self.kilobyte)
      #expect(tus.status == 403, "\(tus.text)")
      #expect(try s.send(.get("/v0/b/app/o/a.bin")).status == 404)
      #expect(try s.send(.get("/v0/b/app/o/b.bin")).status == 404)
      #expect(try s.rowCounts()["objects"] == 0)
      #expect(try s.uploadRows() == 0)
    }
  }

  /// `false && unknown` is false: a known field that decides alone still refuses before the body.
  @Test func aKnownFieldThatDecidesAloneStillDeniesBeforeTheBody() throws {
    try withCreateRule("request.resource.size < 100 && request.resource.md5Hash != ''") { s in
      var head = WireRequest("POST", "/v0/b/app/o?name=k.bin")
      head.addLength = false
      head.headers.append(("Content-Length", "1000"))
      let r = try s.sendHeadOnly(head)
      #expect(r.status == 403, "\(r.text)")
      let tus = try s.request(
        "POST", "/v0/b/app/uploads",
        headers: [
          ("Tus-Resumable", "1.0.0"), ("Upload-Length", "1000"),
          ("Upload-Metadata", LiveService.metadata([("name", "k.bin")])),
        ])
      #expect(tus.status == 403, "\(tus.text)")
      #expect(try s.uploadRows() == 0)
      #expect(s.tmpEntries() == [])
    }
  }
}
