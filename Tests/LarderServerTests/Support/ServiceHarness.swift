import Foundation
import Larder
import LarderServer

/// What an endpoint test needs of a service, whichever way its requests travel: in process
/// (``InProcessService``, `HTTPTestDriver`: milliseconds, most tests) or over loopback
/// (``LiveService``: what only a real connection shows). Both answer with a ``WireResponse``,
/// so a test's checks read the same, and are as strict, either way.
protocol ServiceHarness: AnyObject {
  var directory: URL { get }
  var service: LarderService { get }
  /// One exchange, headers and body exactly as given (plus `Host`, and `Content-Length` as
  /// ``WireRequest`` adds it).
  func send(_ request: WireRequest) throws -> WireResponse
  /// One exchange, headers exactly as given; `Content-Length` only with a body (even an empty one).
  /// Tests call it as ``request(_:_:headers:body:)``.
  func exchange(_ method: String, _ path: String, headers: [(String, String)], body: [UInt8]?) throws
    -> WireResponse
}

extension ServiceHarness {
  var tmpDirectory: URL { directory.appendingPathComponent("tmp") }
  var blobsDirectory: URL { directory.appendingPathComponent("blobs/sha256") }

  /// One exchange, headers exactly as given; `Content-Length` only with a body (even an empty one).
  func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil) throws
    -> WireResponse
  {
    try exchange(method, path, headers: headers, body: body)
  }

  /// Uploads `body` as `name` and returns the metadata JSON (expects 200).
  @discardableResult
  func upload(_ name: String, _ body: [UInt8], bucket: String = "app", headers: [(String, String)] = []) throws
    -> [String: Any]
  {
    let r = try send(.init("POST", "/v0/b/\(bucket)/o?name=\(enc(name))", headers: headers, body: body))
    guard r.status == 200, let json = r.json else { throw WireFailure.unexpected("upload \(name): \(r.status) \(r.text)") }
    return json
  }

  /// Files left in `tmp/` (uploads in flight or leaked).
  func tmpEntries() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: tmpDirectory.path)) ?? [] }

  /// Regular files under `blobs/sha256/`.
  func blobFiles() -> [String] {
    guard let e = FileManager.default.enumerator(atPath: blobsDirectory.path) else { return [] }
    var out: [String] = []
    while let p = e.nextObject() as? String {
      var isDir: ObjCBool = false
      if FileManager.default.fileExists(atPath: blobsDirectory.appendingPathComponent(p).path, isDirectory: &isDir),
        !isDir.boolValue
      {
        out.append(p)
      }
    }
    return out
  }

  /// Row counts of the catalog tables that a publish would touch.
  func rowCounts() throws -> [String: Int] {
    try service.larder.catalog.read { db in
      var out: [String: Int] = [:]
      for table in ["objects", "files", "blobs"] {
        out[table] = Int(try db.row("SELECT count(*) AS n FROM \(table)")?.int("n") ?? -1)
      }
      return out
    }
  }

  /// `Authorization: Bearer …` for a development token of `uid`.
  func auth(_ uid: String) -> [(String, String)] {
    [("Authorization", "Bearer \(service.developmentToken(uid: uid))")]
  }
}
