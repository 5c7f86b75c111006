import Foundation
import Larder
import LarderAuth
import LarderServer
import LarderTestSupport
import Testing

/// `/admin/v1/events…` (subscriptions, deliveries, replay, the feed) and the event metrics,
/// in process under `storage.rules.example`: admin identities only, bad input changes nothing.
@Suite struct EventsEndpointTests {
  func adminAuth(_ s: InProcessService) throws -> [(String, String)] {
    let created = try ServiceAccounts.create(name: "ops", publicURL: "http://larder.test", in: s.service.larder)
    let secret = try #require(s.service.context.serviceAccounts?.secret)
    let token = ServiceAccountAccessToken.issue(
      secret: secret, clientEmail: created.record.clientEmail, keyID: created.record.keyID, scope: "https://www.googleapis.com/auth/devstorage.full_control")
    return [("Authorization", "Bearer \(token)")]
  }

  func subscribe(_ s: InProcessService, _ auth: [(String, String)], _ json: String) throws -> WireResponse {
    try s.send(.init("POST", "/admin/v1/events/subscriptions", headers: auth + [("Content-Type", "application/json")], body: Array(json.utf8)))
  }

  @Test func onlyAdminIdentitiesReachEvents() throws {
    try withInProcessRulesService { s in
      let anonymous = try s.send(.get("/admin/v1/events/subscriptions"))
      #expect(anonymous.status == 401)
      let user = [("Authorization", "Bearer \(s.service.developmentToken(uid: "alice"))")]
      #expect(try s.send(.get("/admin/v1/events?after=0", user)).status == 403)
      #expect(try subscribe(s, user, #"{"url":"http://127.0.0.1:9/","bucket":"app"}"#).status == 403)
      #expect(try s.service.larder.events.subscriptions().isEmpty)
    }
  }

  @Test func anAdminSubscribesListsAndUnsubscribes() throws {
    try withInProcessRulesService { s in
      let auth = try adminAuth(s)
      let made = try subscribe(s, auth, #"{"url":"http://127.0.0.1:9/hook","bucket":"app","prefix":"p/","kinds":["finalized","deleted"]}"#)
      #expect(made.status == 201, "\(made.text)")
      let json = try #require(made.json)
      let id = try #require(json["id"] as? String)
      #expect((json["secret"] as? String)?.hasPrefix("whsec_") == true)
      #expect(json["kinds"] as? [String] == ["finalized", "deleted"])
      let list = try s.send(.get("/admin/v1/events/subscriptions", auth))
      let listed = try #require(list.json?["subscriptions"] as? [[String: Any]])
      #expect(listed.map { $0["id"] as? String } == [id])
      #expect(listed.first?["secret"] == nil)
      #expect(try s.send(.init("DELETE", "/admin/v1/events/subscriptions/\(id)", headers: auth)).status == 204)
      #expect(try s.send(.init("DELETE", "/admin/v1/events/subscriptions/\(id)", headers: auth)).status == 404)
      #expect(try s.service.larder.events.subscriptions().isEmpty)
    }
  }

  @Test func badInputIsA4xxAndChangesNothing() throws {
    try withInProcessRulesService { s in
      let auth = try adminAuth(s)
      let notHTTP = try subscribe(s, auth, #"{"url":"file:///etc/passwd","bucket":"app"}"#)
      #expect(notHTTP.status == 400)
      #expect(notHTTP.text.contains("http:// or https://"))
      let unknownKind = try subscribe(s, auth, #"{"url":"http://127.0.0.1:9/","bucket":"app","kinds":["created"]}"#)
      #expect(unknownKind.status == 400)
      #expect(unknownKind.text.contains("unknown event kind 'created'"))
      #expect(try subscribe(s, auth, #"{"url":"http://127.0.0.1:9/","bucket":"app","mode":"fancy"}"#).status == 400)
      #expect(try subscribe(s, auth, "not json").status == 400)
      #expect(try s.service.larder.events.subscriptions().isEmpty)
      let replay = try s.send(
        .init("POST", "/admin/v1/events/replay", headers: auth, body: Array(#"{"eventId":"nope"}"#.utf8)))
      #expect(replay.status == 404)
      #expect(try s.send(.get("/admin/v1/events?after=garbage", auth)).status == 400)
      #expect(try s.send(.get("/admin/v1/events?wait=999", auth)).status == 400)
    }
  }

  @Test func theFeedAnswersEventsInCommitOrderFromACursor() throws {
    try withInProcessRulesService { s in
      let auth = try adminAuth(s)
      let larder = s.service.larder
      _ = try larder.objects.put(bucket: "app", name: "a", data: Data("1".utf8))
      _ = try larder.objects.put(bucket: "app", name: "a", data: Data("22".utf8))
      let first = try #require(try s.send(.get("/admin/v1/events?after=0&limit=2", auth)).json)
      let events = try #require(first["events"] as? [[String: Any]])
      #expect(events.map { $0["type"] as? String } == [
        "google.cloud.storage.object.v1.finalized", "google.cloud.storage.object.v1.deleted",
      ])
      #expect(events.first?["specversion"] as? String == "1.0")
      #expect((events.first?["data"] as? [String: Any])?["size"] as? String == "1")
      let next = try #require(first["next"] as? String)
      let second = try #require(try s.send(.get("/admin/v1/events?after=\(next)", auth)).json)
      #expect((second["events"] as? [[String: Any]])?.map { $0["type"] as? String } == ["google.cloud.storage.object.v1.finalized"])
      // Nothing newer: a long poll returns empty with the same cursor once its wait is over.
      let last = try #require(second["next"] as? String)
      let started = ContinuousClock.now
      let empty = try #require(try s.send(.get("/admin/v1/events?after=\(last)&wait=1", auth)).json)
      #expect(ContinuousClock.now - started >= .milliseconds(900))
      #expect((empty["events"] as? [Any])?.isEmpty == true)
      #expect(empty["next"] as? String == last)
    }
  }

  @Test func pendingAndDeadAreListedAndMetricsCountThemPerSubscription() throws {
    try withInProcessRulesService { s in
      let auth = try adminAuth(s)
      let larder = s.service.larder
      let sub = try larder.events.subscribe(url: "http://127.0.0.1:9/", bucket: "app")
      _ = try larder.objects.put(bucket: "app", name: "a", data: Data("1".utf8))
      _ = try larder.objects.put(bucket: "app", name: "b", data: Data("1".utf8))
      let pending = try #require(try s.send(.get("/admin/v1/events/deliveries?state=pending", auth)).json)
      #expect((pending["deliveries"] as? [[String: Any]])?.map { $0["name"] as? String } == ["a", "b"])
      try TestStore.settle(larder)
      let queue = EventDeliveryQueue(events: larder.events)
      let claimed = try queue.claim(subscription: sub.id, owner: "t", lease: .seconds(30), limit: 1).deliveries
      try queue.failed(claimed[0], error: "HTTP 500", policy: EventRetryPolicy(giveUpAfter: .zero))
      let dead = try #require(try s.send(.get("/admin/v1/events/deliveries?state=dead", auth)).json)
      #expect((dead["deliveries"] as? [[String: Any]])?.map { $0["lastError"] as? String } == ["HTTP 500"])
      let metrics = try s.send(.get("/metrics")).text
      #expect(metrics.contains("larder_event_pending{subscription=\"\(sub.id)\"} 1\n"), "\(metrics)")
      #expect(metrics.contains("larder_event_dead{subscription=\"\(sub.id)\"} 1\n"))
      #expect(metrics.contains("# TYPE larder_event_lag_seconds gauge\nlarder_event_lag_seconds{subscription=\"\(sub.id)\"} "))
      let replayed = try s.send(
        .init("POST", "/admin/v1/events/replay", headers: auth, body: Array(#"{"since":"2000-01-01T00:00:00Z"}"#.utf8)))
      #expect(replayed.json?["replayed"] as? Int == 2)
      #expect(try larder.events.deliveries(.dead).isEmpty)
    }
  }
}
