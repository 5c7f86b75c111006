import Foundation
import Larder
import LarderHTTP
import LarderServer
import LarderTestSupport
import Synchronization
import Testing

/// Handlers that never wait answer on the thread that parsed the head (no switch to a worker
/// and back); the rest run on workers, so a render or a remote read never holds a loop.
@Suite struct InlineHandlerTests {
  private func runsNow(_ handler: any HTTPHandler, _ target: String, method: String = "GET") throws -> Bool {
    if case .now = handler.start(try HTTPRequest(method: method, target: target)) { return true }
    return false
  }

  @Test func onlyTheRoutesMarkedInlineAndAcceptedByTheirTestAnswerNow() throws {
    var router = Router()
    router.add("GET", "/quick/{name}", route: "quick") { _, _ in .respond(.text("quick")) }
    router.add("GET", "/slow", route: "slow") { _, _ in .respond(.text("slow")) }
    router.runInline(["quick"]) { $0.queryValue("render") == nil }
    #expect(try runsNow(router, "/quick/a"))
    #expect(try runsNow(router, "/quick/a", method: "HEAD"))  // HEAD's fallback to the GET route
    #expect(try !runsNow(router, "/quick/a?render=1"))
    #expect(try !runsNow(router, "/slow"))
    // No route: the 404 and 405 wait on nothing.
    #expect(try runsNow(router, "/nowhere"))
    #expect(try runsNow(router, "/slow", method: "DELETE"))
    guard case .onWorker(let later) = router.start(try HTTPRequest(method: "GET", target: "/slow")),
      case .respond(let response) = later().action
    else {
      Issue.record("/slow did not go to a worker with its answer")
      return
    }
    #expect(response.body.length == 4)
  }

  /// On the embedded store (SQLite, the data directory) Firebase object reads run inline; an
  /// image variant (a render), the GCS reads (which may hash an old row's content and record it)
  /// and every write go to workers; on PostgreSQL or S3 every object read does.
  @Test func objectReadsRunInlineOnlyOnALocalStoreAndNeverForARender() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-inline-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let service = try LarderService(
      options: LarderService.Options(dataDirectory: directory, policy: .allowAll).onTestStores())
    defer { service.stop(timeout: .seconds(1)) }
    let local = TestStore.catalogBase == nil && TestStore.blobsBase == nil
    let app = service.app
    #expect(try runsNow(app, "/healthz"))
    #expect(try runsNow(app, "/v0/b/app/o/a.txt?alt=media") == local)
    #expect(try runsNow(app, "/v0/b/app/o/a.txt?alt=media", method: "HEAD") == local)
    #expect(try runsNow(app, "/v0/b/app/o/a.txt") == local)
    #expect(try !runsNow(app, "/v0/b/app/o/a.jpg?alt=media&width=64"))
    #expect(try !runsNow(app, "/storage/v1/b/app/o/a.txt?alt=media"))
    #expect(try !runsNow(app, "/v0/b/app/o"))
    #expect(try !runsNow(app, "/v0/b/app/o?name=a.txt", method: "POST"))
    #expect(try !runsNow(app, "/v0/b/app/o/a.txt", method: "DELETE"))
  }

  /// Rules that read `resource.md5Hash` make judging a large old row hash its content (its MD5
  /// is not known until the background hasher gets to it): such reads go to workers, from the
  /// moment the rules that mention it are loaded.
  @Test func objectReadsLeaveTheLoopWhileTheRulesReadMD5Hash() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-inline-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    func rules(_ condition: String) -> String {
      "rules_version = '2';\nservice firebase.storage {\n  match /b/{bucket}/o/{name=**} {\n    allow read: if \(condition);\n  }\n}\n"
    }
    let file = try temporaryRulesFile(rules("resource.md5Hash != 'x'"))
    defer { try? FileManager.default.removeItem(at: file) }
    let service = try LarderService(
      options: LarderService.Options(dataDirectory: directory, policy: .rulesFile(file)).onTestStores())
    defer { service.stop(timeout: .seconds(1)) }
    let local = TestStore.catalogBase == nil && TestStore.blobsBase == nil
    #expect(try !runsNow(service.app, "/v0/b/app/o/a.txt?alt=media"))
    #expect(try !runsNow(service.app, "/v0/b/app/o/a.txt"))
    try Data(rules("resource.size > 0").utf8).write(to: file)
    #expect(service.rules?.reload() == nil)
    #expect(try runsNow(service.app, "/v0/b/app/o/a.txt?alt=media") == local)
    #expect(try runsNow(service.app, "/v0/b/app/o/a.txt") == local)
  }

  /// An inline route runs on the loop's thread, any other on a worker's; a
  /// long pipelined run of inline requests is answered in order on one connection.
  @Test func theEpollEngineRunsInlineHandlersOnItsLoop() throws {
    let threads = Mutex<[String: String]>([:])
    var router = Router()
    for label in ["quick", "slow"] {
      router.add("GET", "/\(label)/{n}", route: label) { _, params in
        // The kernel's name of the thread (`LinuxIO.nameThisThread`).
        let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
        threads.withLock { $0[label] = name }
        return .respond(.text(try params.decoded("n")))
      }
    }
    router.runInline(["quick"]) { _ in true }
    try withServer(handler: router) { server in
      let c = try WireConnection(port: server.boundPort)
      try c.send("GET /quick/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /slow/2 HTTP/1.1\r\nHost: x\r\n\r\n")
      #expect(try c.readResponse().text == "1")
      #expect(try c.readResponse().text == "2")
      let names = threads.withLock { $0 }
      #expect(names["quick"]?.hasPrefix("http-loop-") == true, "\(names)")
      #expect(names["slow"]?.hasPrefix("http-worker-") == true, "\(names)")

      // About 35 KB: the socket buffers hold it whole, so it is sent before a byte is read.
      let count = 1_000
      try c.send((0..<count).map { "GET /quick/\($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
      for i in 0..<count { #expect(try c.readResponse().text == "\(i)") }
    }
  }
}
