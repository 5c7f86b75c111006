import Foundation
import Larder
import LarderAuth
import LarderServer
import Testing

/// The events feed's long poll (`GET /admin/v1/events?wait=N`) holds no server thread while it
/// waits: it is answered as soon as an event commits, with the empty page at its deadline, and
/// at once when the server drains; any number of them leave the other requests their threads.
@Suite struct FeedLongPollTests {
  private func adminAuth(_ s: LiveService) throws -> [(String, String)] {
    let created = try ServiceAccounts.create(name: "ops", publicURL: "http://larder.test", in: s.service.larder)
    let secret = try #require(s.service.context.serviceAccounts?.secret)
    let token = ServiceAccountAccessToken.issue(
      secret: secret, clientEmail: created.record.clientEmail, keyID: created.record.keyID,
      scope: "https://www.googleapis.com/auth/devstorage.full_control")
    return [("Authorization", "Bearer \(token)")]
  }

  /// The feed's cursor after every event so far, the test's `committed` ones at least: on
  /// PostgreSQL the feed holds an event back while older transactions of other suites run (up
  /// to a second per page), so an empty page alone does not say the test's events were passed.
  private func currentCursor(_ s: LiveService, _ auth: [(String, String)], committed: Int = 0) throws -> String {
    var cursor = "0"
    var seen = 0
    let deadline = ContinuousClock.now + .seconds(30)
    while true {
      let page = try #require(try s.send(.get("/admin/v1/events?after=\(cursor)&limit=1000", auth)).json)
      let next = try #require(page["next"] as? String)
      seen += (page["events"] as? [Any])?.count ?? 0
      if next == cursor && (seen >= committed || ContinuousClock.now > deadline) { return cursor }
      cursor = next
    }
  }

  private func poll(_ s: LiveService, _ auth: [(String, String)], after cursor: String, wait: Int) throws
    -> WireConnection
  {
    let c = try WireConnection(port: s.port)
    try c.send(WireRequest("GET", "/admin/v1/events?after=\(cursor)&wait=\(wait)", headers: auth).bytes(closing: true))
    return c
  }

  /// 200 long polls at once (the test server has 8 workers): a download that runs on a worker
  /// is answered meanwhile, and one commit answers them all with its event.
  @Test func manyLongPollsLeaveTheWorkersFreeAndOneCommitAnswersThemAll() throws {
    try withRulesService(configure: { $0.http.perIPConnectionLimit = 0 }) { s in
      let auth = try adminAuth(s)
      let larder = s.service.larder
      _ = try larder.objects.put(bucket: "app", name: "plain.txt", data: Data("plain".utf8))
      let cursor = try currentCursor(s, auth, committed: 1)
      let polls = try (0..<200).map { _ in try poll(s, auth, after: cursor, wait: 30) }
      #expect(pollUntil { s.service.server.inFlightRequests == 200 })

      let started = ContinuousClock.now
      // The GCS download never runs on a loop: it needs a worker.
      let plain = try s.send(.get("/storage/v1/b/app/o/plain.txt?alt=media", auth))
      #expect(plain.status == 200 && plain.text == "plain")
      #expect(ContinuousClock.now - started < .seconds(10))
      #expect(pollUntil { s.service.server.inFlightRequests == 200 })

      _ = try larder.objects.put(bucket: "app", name: "new.txt", data: Data("new".utf8))
      let committed = ContinuousClock.now
      for c in polls {
        let r = try c.readResponse()
        #expect(r.status == 200 && r["Cache-Control"] == "no-store")
        let events = try #require(r.json?["events"] as? [[String: Any]])
        #expect(events.count == 1)
        #expect((events.first?["data"] as? [String: Any])?["name"] as? String == "new.txt")
      }
      #expect(ContinuousClock.now - committed < .seconds(15))
    }
  }

  /// A poll is answered when an event commits, long before its wait is over; one with nothing
  /// to see gets the empty page with the same cursor at its deadline, not before.
  @Test func aLongPollIsAnsweredByACommitOrEmptyAtItsDeadline() throws {
    try withRulesService { s in
      let auth = try adminAuth(s)
      let cursor = try currentCursor(s, auth)
      let waiting = try poll(s, auth, after: cursor, wait: 30)
      usleep(300_000)
      _ = try s.service.larder.objects.put(bucket: "app", name: "a.txt", data: Data("a".utf8))
      let committed = ContinuousClock.now
      let r = try waiting.readResponse()
      #expect(ContinuousClock.now - committed < .seconds(10))
      #expect(r.status == 200)
      let events = try #require(r.json?["events"] as? [[String: Any]])
      #expect(events.map { $0["type"] as? String } == ["google.cloud.storage.object.v1.finalized"])
      let next = try #require(r.json?["next"] as? String)
      #expect(next != cursor)

      let started = ContinuousClock.now
      let empty = try poll(s, auth, after: next, wait: 1).readResponse()
      #expect(ContinuousClock.now - started >= .milliseconds(900))
      #expect(empty.status == 200)
      #expect((empty.json?["events"] as? [Any])?.isEmpty == true)
      #expect(empty.json?["next"] as? String == next)
      // A bad cursor is refused before any wait.
      #expect(try poll(s, auth, after: "garbage", wait: 30).readResponse().status == 400)
    }
  }

  /// Stopping the server answers a waiting poll at once with nothing new (and `Connection:
  /// close`), so the drain does not wait out the poll.
  @Test func aDrainAnswersAWaitingPollAtOnce() throws {
    let s = try LiveService(policy: .rulesFile(exampleRulesURL))
    defer { s.close() }
    let auth = try adminAuth(s)
    let cursor = try currentCursor(s, auth)
    // A request ends just after its answer is written, so the cursor's may still count while its
    // client has the answer: wait for it, or "one in flight" could be it while the poll still sits
    // in the listen backlog, which the drain then resets (ECONNRESET under a loaded test run).
    #expect(pollUntil { s.service.server.inFlightRequests == 0 })
    let waiting = try poll(s, auth, after: cursor, wait: 60)
    #expect(pollUntil { s.service.server.inFlightRequests == 1 })
    let started = ContinuousClock.now
    s.close()
    #expect(ContinuousClock.now - started < .seconds(10))
    let r = try waiting.readResponse()
    #expect(r.status == 200 && r["Connection"] == "close")
    #expect((r.json?["events"] as? [Any])?.isEmpty == true)
    #expect(r.json?["next"] as? String == cursor)
  }
}
