import Foundation
import Larder
import LarderServer

/// Requests shaped as the Firebase JS SDK sends them (packages/storage/src/implementation/requests.ts).
enum FirebaseWire {
  static let boundary = "83671420925871936049"

  /// `uploadBytes`: one multipart POST.
  static func multipart(
    _ name: String, content: [UInt8], contentType: String = "text/plain", json: [String: Any]? = nil,
    boundary: String = boundary, extraHeaders: [(String, String)] = []
  ) throws -> WireRequest {
    let resource = json ?? ["name": name, "contentType": contentType]
    let jsonText = String(decoding: try JSONSerialization.data(withJSONObject: resource, options: [.sortedKeys]), as: UTF8.self)
    let body =
      Array("--\(boundary)\r\nContent-Type: application/json; charset=utf-8\r\n\r\n\(jsonText)\r\n--\(boundary)\r\nContent-Type: \(contentType)\r\n\r\n".utf8)
      + content + Array("\r\n--\(boundary)--".utf8)
    return WireRequest(
      "POST", "/v0/b/app/o?name=\(enc(name))",
      headers: [("X-Goog-Upload-Protocol", "multipart"), ("Content-Type", "multipart/related; boundary=\(boundary)")]
        + extraHeaders,
      body: body)
  }

  /// `uploadBytesResumable`'s `start`.
  static func start(
    _ name: String, length: Int?, contentType: String = "application/octet-stream", json: [String: Any]? = nil,
    extraHeaders: [(String, String)] = []
  ) throws -> WireRequest {
    let resource = json ?? ["name": name, "contentType": contentType]
    var headers = [
      ("X-Goog-Upload-Protocol", "resumable"), ("X-Goog-Upload-Command", "start"),
      ("X-Goog-Upload-Header-Content-Type", contentType), ("Content-Type", "application/json; charset=utf-8"),
    ]
    if let length { headers.append(("X-Goog-Upload-Header-Content-Length", String(length))) }
    return WireRequest(
      "POST", "/v0/b/app/o?name=\(enc(name))", headers: headers + extraHeaders,
      body: Array(try JSONSerialization.data(withJSONObject: resource)))
  }

  /// A command to a session's URL (given as the server returned it, absolute).
  static func command(_ url: String, _ command: String, offset: Int?, body: [UInt8] = [], extraHeaders: [(String, String)] = [])
    -> WireRequest
  {
    var headers = [("X-Goog-Upload-Command", command)]
    if let offset { headers.append(("X-Goog-Upload-Offset", String(offset))) }
    return WireRequest("POST", target(of: url), headers: headers + extraHeaders, body: body)
  }

  /// The path and query of an absolute URL.
  static func target(of url: String) -> String {
    guard let scheme = url.range(of: "://"), let slash = url[scheme.upperBound...].firstIndex(of: "/") else { return url }
    return String(url[slash...])
  }
}

extension ServiceHarness {
  /// Starts a resumable session and returns its upload URL (expects 200 active).
  func startSession(_ name: String, length: Int?, headers: [(String, String)] = []) throws -> String {
    let r = try send(FirebaseWire.start(name, length: length, extraHeaders: headers))
    guard r.status == 200, r["X-Goog-Upload-Status"] == "active", let url = r["X-Goog-Upload-URL"] else {
      throw WireFailure.unexpected("start: \(r.status) \(r.text)")
    }
    return url
  }

  /// The object's bytes and generation (nil when it does not exist).
  func snapshot(_ name: String) throws -> (bytes: [UInt8], generation: String)? {
    let meta = try send(.get("/v0/b/app/o/\(enc(name))"))
    guard meta.status == 200, let generation = meta.json?["generation"] as? String else { return nil }
    return (try send(.get("/v0/b/app/o/\(enc(name))?alt=media")).body, generation)
  }

  /// Rows in `uploads`.
  func uploadRows() throws -> Int {
    try service.larder.catalog.read { db in Int(try db.row("SELECT count(*) AS n FROM uploads")?.int("n") ?? -1) }
  }
}
