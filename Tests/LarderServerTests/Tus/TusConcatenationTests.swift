import Foundation
import Larder
import LarderHTTP
import LarderServer
import Synchronization
import Testing

/// A final concatenation is copied off the server's threads: the server (here one thread for
/// every connection) goes on serving while it runs, and the final upload reports itself
/// unfinished until it is published, or the reason it failed.
@Suite struct TusConcatenationTests {
  /// Allows everything, but the second ask about a final's name (the admission step, which runs
  /// on the concatenation's own thread; the first is the early ask at creation) waits until the
  /// test opens the gate, and then allows or denies as told.
  final class GatedPolicy: AccessPolicy, Sendable {
    let gate = DispatchSemaphore(value: 0)
    let deny = Mutex(false)
    let asked = Mutex(0)
    func decide(_ request: AccessRequest) -> AccessDecision {
      guard request.incoming != nil, request.name.hasSuffix("ed.bin") else { return .allow("test") }
      guard asked.withLock({ $0 += 1; return $0 }) >= 2 else { return .allow("test") }
      gate.wait()
      return deny.withLock { $0 } ? .deny("test: refused at the end") : .allow("test")
    }
  }

  private func partials(_ h: TusHarness, _ parts: [[UInt8]]) throws -> [String] {
    try parts.map { part in
      let r = try h.request(
        "POST", "/v0/b/app/uploads",
        headers: [TusHarness.tus, ("Upload-Length", String(part.count)), ("Upload-Concat", "partial")])
      let path = try #require(r["Location"])
      #expect(try h.patch(path, offset: 0, part).status == 204)
      return path
    }
  }

  private func createFinal(_ h: TusHarness, _ concat: String, name: String) throws -> WireResponse {
    try h.request(
      "POST", "/v0/b/app/uploads",
      headers: [TusHarness.tus, ("Upload-Concat", concat), ("Upload-Metadata", TusHarness.metadata([("name", name)]))])
  }

  @Test func theServerKeepsServingWhileAConcatenationRunsAndItsFinalReportsProgress() throws {
    let policy = GatedPolicy()
    let h = try TusHarness(policy: .custom(policy)) { options in options.http.threadPoolSize = 1 }
    defer { h.close() }
    let a = testBytes(70_000, seed: 21)
    let b = testBytes(30_000, seed: 22)
    let paths = try partials(h, [a, b])
    let concat = "final;\(h.base)\(paths[0]) \(paths[1])"
    let started = Date()
    let final = try createFinal(h, concat, name: "joined.bin")
    // Answered after the bounded wait, while the concatenation is held at its admission step.
    #expect(final.status == 201, "\(final.status) \(final.text)")
    #expect(Date().timeIntervalSince(started) < 5)
    let finalPath = try #require(final["Location"])
    // The only server thread is free: other requests are served meanwhile.
    #expect(try h.request("GET", "/healthz").status == 200)
    let running = try h.head(finalPath)
    #expect(running.status == 200)
    #expect(running["Upload-Offset"] == nil, "tus: no offset until the concatenation is done")
    #expect(running["Upload-Length"] == "100000")
    #expect(running["Upload-Concat"] == concat)
    #expect(try h.objectBytes("joined.bin").status == 404)
    #expect(try h.patch(finalPath, offset: 0, [1]).status == 403)
    // A partial it holds cannot be terminated meanwhile.
    #expect(try h.request("DELETE", paths[0], headers: [TusHarness.tus]).status == 423)
    policy.gate.signal()
    var done = running
    let deadline = Date().addingTimeInterval(30)
    while done["Upload-Offset"] == nil, Date() < deadline {
      usleep(20_000)
      done = try h.head(finalPath)
    }
    #expect(done.status == 200)
    #expect(done["Upload-Offset"] == "100000")
    #expect(done["Upload-Concat"] == concat)
    #expect(try h.objectBytes("joined.bin").body == a + b)
  }

  @Test func aConcatenationRefusedAfterItsAnswerReportsTheRefusalToItsOwner() throws {
    let policy = GatedPolicy()
    policy.deny.withLock { $0 = true }
    let h = try TusHarness(policy: .custom(policy)) { options in options.http.threadPoolSize = 1 }
    defer { h.close() }
    let paths = try partials(h, [testBytes(1000, seed: 1), testBytes(2000, seed: 2)])
    let final = try createFinal(h, "final;\(paths[0]) \(paths[1])", name: "refused.bin")
    #expect(final.status == 201)
    let finalPath = try #require(final["Location"])
    policy.gate.signal()
    var head = try h.head(finalPath)
    let deadline = Date().addingTimeInterval(30)
    while head.status == 200, Date() < deadline {
      usleep(20_000)
      head = try h.head(finalPath)
    }
    #expect(head.status == 403)
    #expect(try h.objectBytes("refused.bin").status == 404)
    // The partials are free again: a new final can be made from them.
    #expect(try h.request("DELETE", paths[0], headers: [TusHarness.tus]).status == 204)
  }

  @Test func aSmallConcatenationIsPublishedBeforeItsAnswer() throws {
    let h = try TusHarness()
    defer { h.close() }
    let a = testBytes(5000, seed: 3)
    let b = testBytes(7000, seed: 4)
    let paths = try partials(h, [a, b])
    let final = try createFinal(h, "final;\(paths[1]) \(paths[0])", name: "small.bin")
    #expect(final.status == 201)
    #expect(try h.objectBytes("small.bin").body == b + a)
    let head = try h.head(try #require(final["Location"]))
    #expect(head["Upload-Offset"] == "12000")
    #expect(head["Upload-Concat"] == "final;\(paths[1]) \(paths[0])")
  }
}
