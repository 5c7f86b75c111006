import Foundation
import LarderCrypto
import LarderHTTP
import LarderServer

/// A sink that hashes the body and reports through `SinkEvents`; optionally refuses bodies
/// beyond `limit` with 413, and optionally waits on each chunk (to hold a request in flight).
final class HashingSink: HTTPBodySink {
  let events: SinkEvents
  let limit: Int64?
  let digest = Digest(.sha256)
  var count: Int64 = 0

  init(events: SinkEvents, limit: Int64? = nil) {
    self.events = events
    self.limit = limit
  }

  func receive(_ chunk: UnsafeRawBufferPointer) throws {
    count += Int64(chunk.count)
    let total = count
    events.state.withLock { s in
      s.received = total
      s.maxChunk = max(s.maxChunk, chunk.count)
    }
    if let limit, count > limit {
      throw HTTPResponseError(
        .error(status: 413, message: "body over \(limit) bytes", extra: ["maxSize": limit]))
    }
    digest.update(chunk)
  }

  func finish() throws -> HTTPResponse {
    let hash = Hex.encode(digest.finalize())
    let total = count
    events.state.withLock { s in
      s.finishes += 1
      s.sha256 = hash
    }
    return .json(["size": "\(total)", "sha256": hash])
  }

  func cancel() {
    events.state.withLock { $0.cancels += 1 }
  }
}

/// The routes the live-server tests talk to.
func testRouter(events: SinkEvents = SinkEvents(), file: String? = nil, metrics: Metrics = Metrics())
  -> Router
{
  var router = Router()
  router.add("GET", "/hello", route: "hello") { _, _ in .respond(.text("hello world")) }
  router.add("GET", "/echo/{name}", route: "echo") { request, params in
    .respond(
      .json([
        "name": try params.decoded("name"), "raw": String(params.raw["name"]!),
        "q": request.queryValue("q") ?? "-",
      ]))
  }
  router.add("POST", "/upload", route: "upload") { _, _ in
    .receiveBody(HashingSink(events: events, limit: 256 * 1024))
  }
  router.add("PUT", "/upload", route: "upload") { _, _ in .receiveBody(HashingSink(events: events)) }
  router.add("GET", "/metrics", route: "metrics") { _, _ in .respond(.text(metrics.renderPrometheus())) }
  router.add("GET", "/file", route: "file") { request, _ in
    let fd = open(file!, O_RDONLY | O_CLOEXEC)
    var st = stat()
    fstat(fd, &st)
    let offset = Int64(request.queryValue("offset") ?? "0")!
    let length = Int64(request.queryValue("length") ?? "\(Int64(st.st_size) - offset)")!
    return .respond(
      HTTPResponse(
        status: 200, headers: ["Content-Type": "application/octet-stream"],
        body: .file(HTTPFileBody(takingOwnershipOf: fd, offset: offset, length: length))))
  }
  router.add("HEAD", "/size", route: "size") { _, _ in .respond(HTTPResponse(body: .lengthOnly(123_456))) }
  return router
}
