import Foundation
import LarderHTTP
import LarderServer
import Testing

@Suite struct HTTPPrimitivesTests {
  @Test func percentDecodingIsStrict() throws {
    #expect(try PercentEncoding.decode("users%2Fu1%2Favatar.png") == "users/u1/avatar.png")
    #expect(try PercentEncoding.decode("a+b%20c") == "a+b c")
    #expect(try PercentEncoding.decode("%C3%A9t%c3%a9") == "été")
    #expect(try PercentEncoding.decode("%00") == "\u{0}")
    #expect(throws: HTTPRequestError.malformedPercentEncoding("%")) { try PercentEncoding.decode("%") }
    #expect(throws: HTTPRequestError.malformedPercentEncoding("ab%4")) { try PercentEncoding.decode("ab%4") }
    #expect(throws: HTTPRequestError.malformedPercentEncoding("%G0")) { try PercentEncoding.decode("%G0") }
    #expect(throws: HTTPRequestError.invalidUTF8("%FF")) { try PercentEncoding.decode("%FF") }
    #expect(throws: HTTPRequestError.invalidUTF8("%C3")) { try PercentEncoding.decode("%C3") }
  }

  @Test func percentEncodingRoundTrips() throws {
    let name = "users/ü 1/a+b?&=%.png"
    let encoded = PercentEncoding.encodeComponent(name)
    #expect(encoded == "users%2F%C3%BC%201%2Fa%2Bb%3F%26%3D%25.png")
    #expect(try PercentEncoding.decode(encoded) == name)
  }

  @Test func queryItemsParse() throws {
    let items = try HTTPQueryItem.parse("name=a%2Fb&alt=media&&flag&empty=&x=1=2")
    #expect(
      items == [
        HTTPQueryItem(name: "name", value: "a/b"), HTTPQueryItem(name: "alt", value: "media"),
        HTTPQueryItem(name: "flag", value: nil), HTTPQueryItem(name: "empty", value: ""),
        HTTPQueryItem(name: "x", value: "1=2"),
      ])
    #expect(throws: HTTPRequestError.malformedPercentEncoding("%zz")) { try HTTPQueryItem.parse("a=%zz") }
  }

  @Test func requestParsesTargetAndHeaders() throws {
    let r = try HTTPRequest(
      method: "GET", target: "/v0/b/app/o/a%2Fb?alt=media&maxSize=10",
      headers: ["content-length": "0", "X-Request-Id": "id-1"])
    #expect(r.path == "/v0/b/app/o/a%2Fb")
    #expect(r.rawQuery == "alt=media&maxSize=10")
    #expect(r.queryValue("maxSize") == "10")
    #expect(r.queryValue("missing") == nil)
    #expect(r.rawPathSegments == ["v0", "b", "app", "o", "a%2Fb"])
    #expect(r.contentLength == 0)
    #expect(r.id == "id-1")
    #expect(r.headers["CONTENT-LENGTH"] == "0")
    #expect(throws: HTTPRequestError.malformedTarget) { try HTTPRequest(method: "GET", target: "http://x/") }
    #expect(throws: HTTPRequestError.malformedTarget) { try HTTPRequest(method: "GET", target: "/a b") }
    #expect(throws: HTTPRequestError.invalidContentLength) {
      try HTTPRequest(method: "PUT", target: "/", headers: ["Content-Length": "+5"])
    }
    let long = String(repeating: "a", count: 129)
    #expect(try HTTPRequest(method: "GET", target: "/", headers: ["X-Request-Id": long]).id.count == 32)
  }

  @Test func headersKeepOrderAndRepeats() {
    var h: HTTPHeaders = ["Vary": "Origin"]
    h.add("vary", "Accept")
    h.add("Content-Type", "text/plain")
    #expect(h.values(for: "VARY") == ["Origin", "Accept"])
    h.set("Vary", "*")
    #expect(h.values(for: "vary") == ["*"])
    #expect(h.fields.map(\.name) == ["Content-Type", "Vary"])
    h.remove("content-type")
    #expect(h.count == 1 && !h.contains("Content-Type"))
  }

  @Test func routerMatchesRawSegments() throws {
    var router = Router()
    router.add("GET", "/v0/b/{bucket}/o/{name}", route: "objects.get") { _, p in
      .respond(.text("\(try p.decoded("bucket"))|\(try p.decoded("name"))"))
    }
    router.add("DELETE", "/v0/b/{bucket}/o/{name}", route: "objects.delete") { _, _ in
      .respond(HTTPResponse(status: 204))
    }
    router.add("GET", "/files/{rest...}", route: "files") { _, p in .respond(.text(String(p.raw["rest"]!))) }

    func run(_ method: String, _ target: String) throws -> (HTTPResponse, String?) {
      let d = router.head(try HTTPRequest(method: method, target: target))
      guard case .respond(let r) = d.action else {
        Issue.record("expected a response")
        return (HTTPResponse(), nil)
      }
      return (r, d.routeLabel)
    }
    let (get, label) = try run("GET", "/v0/b/app/o/users%2Fu1")
    #expect(get.body.length == 12 && label == "objects.get")
    if case .bytes(let b) = get.body { #expect(String(decoding: b, as: UTF8.self) == "app|users/u1") }
    #expect(try run("HEAD", "/v0/b/app/o/x").1 == "objects.get")
    let (notAllowed, l405) = try run("PUT", "/v0/b/app/o/x")
    #expect(notAllowed.status == 405 && l405 == "unmatched")
    #expect(notAllowed.headers["Allow"] == "GET, DELETE, HEAD")
    #expect(try run("GET", "/v0/b/app/o/users/u1").0.status == 404)  // a decoded slash is two segments
    #expect(try run("GET", "/v0/b/app/o/").0.status == 404)  // empty name
    let (bad, _) = try run("GET", "/v0/b/app/o/%zz")
    #expect(bad.status == 400)
    if case .bytes(let b) = try run("GET", "/files/a/b%2Fc").0.body {
      #expect(String(decoding: b, as: UTF8.self) == "a/b%2Fc")
    }
  }

  /// The router tries only the routes a path's first segment can match, but in the order they
  /// were added, whether a route starts with a literal or a parameter: the first added wins, a
  /// 405's `Allow` lists both kinds in order, a path no literal starts takes the parameter
  /// routes alone, and routes marked later (`runInline`) keep their place.
  @Test func routesStartingWithAParameterKeepTheirPlaceAmongLiteralOnes() throws {
    var router = Router()
    router.add("GET", "/{bucket}/{name}", route: "param-first") { _, _ in .respond(.text("param")) }
    router.add("GET", "/v0/{name}", route: "literal") { _, _ in .respond(.text("literal")) }
    router.add("PUT", "/v0/only-put", route: "literal-put") { _, _ in .respond(.text("put")) }
    router.add("DELETE", "/{bucket}/{name}", route: "param-delete") { _, _ in .respond(.text("delete")) }
    router.add("GET", "/v0/{a}/{b}/{c}", route: "deep") { _, _ in .respond(.text("deep")) }
    router.runInline(["literal"]) { _ in true }
    func label(_ method: String, _ target: String) throws -> String? {
      router.head(try HTTPRequest(method: method, target: target)).routeLabel
    }
    #expect(try label("GET", "/v0/x") == "param-first")  // added first, matches too
    #expect(try label("DELETE", "/v0/x") == "param-delete")
    #expect(try label("PUT", "/v0/only-put") == "literal-put")
    #expect(try label("GET", "/v0/a/b/c") == "deep")
    #expect(try label("GET", "/other/x") == "param-first")
    #expect(try label("GET", "/other/x/y") == "unmatched")
    let refused = router.head(try HTTPRequest(method: "POST", target: "/v0/only-put"))
    guard case .respond(let r) = refused.action else {
      Issue.record("expected a response")
      return
    }
    #expect(r.status == 405)
    #expect(r.headers["Allow"] == "GET, PUT, DELETE, HEAD")
    #expect(router.labels == ["param-first", "literal", "literal-put", "param-delete", "deep", "unmatched"])
  }

  @Test func errorResponsesHaveFirebaseShape() throws {
    let r = HTTPResponse.error(status: 413, message: "too big", extra: ["size": 10, "maxSize": 5])
    guard case .bytes(let b) = r.body else {
      Issue.record("no body")
      return
    }
    #expect(
      String(decoding: b, as: UTF8.self)
        == #"{"error":{"code":413,"maxSize":5,"message":"too big","size":10,"status":"OUT_OF_RANGE"}}"#)
    #expect(r.headers["Content-Type"] == "application/json; charset=utf-8")
    #expect(HTTPResponse.defaultErrorResponse(for: CocoaError(.fileNoSuchFile)).status == 500)
    #expect(HTTPResponse.defaultErrorResponse(for: HTTPRequestError.headersTooLarge(limit: 1)).status == 431)
  }

  @Test func accessLogEscapesHostileText() throws {
    let entry = AccessLogEntry(
      time: 0, requestID: "r", method: "GET", path: "/a\"b\\c\n\u{1}", route: "x", status: 200, bytesIn: 1,
      bytesOut: 2, durationMilliseconds: 1.5, remote: "::1", outcome: "ok")
    let json = try #require(try JSONSerialization.jsonObject(with: Data(entry.json.utf8)) as? [String: Any])
    #expect(json["path"] as? String == "/a\"b\\c\n\u{1}")
    #expect(json["time"] as? String == "1970-01-01T00:00:00.000Z")
    #expect(!entry.json.contains("\n"))
  }
}
