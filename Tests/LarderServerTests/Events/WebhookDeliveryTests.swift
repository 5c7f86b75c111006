import Foundation
import Larder
import LarderAuth
import LarderCrypto
import LarderServer
import Testing

/// The server delivers every object change to its webhook subscriptions: CloudEvents in binary
/// mode, signed, at least once, in order per object, retried on failure, redirects not followed.
@Suite struct WebhookDeliveryTests {
  /// Fast knobs: retries after 20 ms doubling to 100 ms, a 2 s timeout.
  static func fast(_ options: inout LarderService.Options) {
    options.events.pollInterval = .milliseconds(100)
    options.events.timeout = .seconds(2)
    options.events.leaseGrace = .milliseconds(500)
    options.events.retry = EventRetryPolicy(firstDelay: .milliseconds(20), maxDelay: .milliseconds(100), giveUpAfter: .seconds(3600))
  }

  /// Checks the Standard Webhooks signature of `r` with `secret` (an independent computation;
  /// the interop tests check it with the reference library).
  func signatureIsValid(_ r: WebhookReceiver.Received, secret: String) -> Bool {
    guard let id = r["webhook-id"], let ts = r["webhook-timestamp"], let sig = r["webhook-signature"],
      let key = Data(base64Encoded: String(secret.dropFirst("whsec_".count)))
    else { return false }
    let mac = HMAC.sha256(key: [UInt8](key), message: Array("\(id).\(ts).".utf8) + r.body)
    return sig == "v1," + Data(mac).base64EncodedString()
  }

  /// The keys whose values differ between two JSON objects (with both values).
  static func differences(_ a: [String: Any], _ b: [String: Any]) -> [String] {
    Set(a.keys).union(b.keys).sorted().compactMap { key in
      let (x, y) = (a[key], b[key])
      if let x, let y, NSDictionary(dictionary: [key: x]).isEqual(to: [key: y]) { return nil }
      return "\(key): \(x.map { "\($0)" } ?? "nil") != \(y.map { "\($0)" } ?? "nil")"
    }
  }

  static func expectSame(_ a: [String: Any], _ b: [String: Any], sourceLocation: SourceLocation = #_sourceLocation) throws {
    let d = differences(a, b)
    #expect(d.isEmpty, "\(d)", sourceLocation: sourceLocation)
  }

  @Test func finalizedMetadataUpdatedAndDeletedArriveSignedWithTheObjectsGetResource() throws {
    let receiver = try WebhookReceiver()
    // Links are built on the public URL, by objects.get and by the deliverer alike.
    try withService(configure: {
      Self.fast(&$0)
      $0.publicURL = "https://files.example.test"
    }) { s in
      let sub = try s.service.larder.events.subscribe(url: receiver.url, bucket: "app")
      #expect(try s.send(.init("POST", "/v0/b/app/o?name=docs%2Fa.txt", body: Array("hello".utf8))).status == 200)
      let afterUpload = try s.send(.get("/storage/v1/b/app/o/docs%2Fa.txt"))
      #expect(afterUpload.status == 200)
      let patch = WireRequest(
        "PATCH", "/storage/v1/b/app/o/docs%2Fa.txt", headers: [("Content-Type", "application/json")],
        body: Array(#"{"metadata":{"color":"blue"}}"#.utf8))
      #expect(try s.send(patch).status == 200)
      let afterPatch = try s.send(.get("/storage/v1/b/app/o/docs%2Fa.txt"))
      #expect(try s.send(.init("DELETE", "/storage/v1/b/app/o/docs%2Fa.txt")).status == 204)
      let got = receiver.wait { $0.count >= 3 }
      #expect(got.map { $0["ce-type"] ?? "" } == [
        "google.cloud.storage.object.v1.finalized", "google.cloud.storage.object.v1.metadataUpdated",
        "google.cloud.storage.object.v1.deleted",
      ])
      let ids = try s.service.larder.events.outbox().map(\.id)
      #expect(got.map { $0["ce-id"] ?? "" } == ids)
      for r in got {
        #expect(r["ce-specversion"] == "1.0")
        #expect(r["ce-source"] == "//storage.googleapis.com/projects/_/buckets/app")
        #expect(r["ce-subject"] == "objects/docs/a.txt")
        #expect(r["content-type"] == "application/json")
        #expect(r["webhook-id"] == r["ce-id"])
        #expect(signatureIsValid(r, secret: sub.secret))
        #expect(!signatureIsValid(r, secret: "whsec_" + Data(repeating: 1, count: 24).base64EncodedString()))
      }
      // data is objects.get's answer, field for field (deleted: as it was, plus timeDeleted).
      let finalized = try #require(got[0].json)
      try Self.expectSame(finalized, try #require(afterUpload.json))
      let updated = try #require(got[1].json)
      try Self.expectSame(updated, try #require(afterPatch.json))
      var deleted = try #require(got[2].json)
      #expect(deleted.removeValue(forKey: "timeDeleted") is String)
      try Self.expectSame(deleted, try #require(afterPatch.json))
      #expect((updated["metadata"] as? [String: String]) == ["color": "blue"])
      #expect((finalized["selfLink"] as? String)?.hasPrefix("https://files.example.test/storage/v1/b/app/o/") == true)
      #expect(finalized["md5Hash"] as? String == Data(Digest.hash(.md5, Array("hello".utf8))).base64EncodedString())
    }
  }

  @Test func aReceiverFailingHalfItsDeliveriesGetsEveryEventInOrderPerObjectWithTheSameIds() throws {
    let receiver = try WebhookReceiver { n in (n % 2 == 0 ? 500 : 200, .zero) }
    try withService(configure: Self.fast) { s in
      let larder = s.service.larder
      _ = try larder.events.subscribe(url: receiver.url, bucket: "app")
      for round in 0..<3 {
        for name in ["a", "b", "c"] {
          _ = try larder.objects.put(bucket: "app", name: name, data: Data("\(name)\(round)".utf8))
        }
      }
      let events = try larder.events.outbox()
      #expect(events.count == 15)  // per name: finalized, then (deleted, finalized) twice
      receiver.wait { $0.filter { (200..<300).contains($0.status) }.count >= 15 }
      let acknowledged = receiver.acknowledged
      #expect(acknowledged.count == 15)
      #expect(Set(acknowledged.compactMap { $0["ce-id"] }) == Set(events.map(\.id)))
      for name in ["a", "b", "c"] {
        let expected = events.filter { $0.object.name == name }.map(\.id)
        #expect(acknowledged.filter { $0["ce-subject"] == "objects/\(name)" }.compactMap { $0["ce-id"] } == expected)
        // Every attempt of an object's events came in order: a retry repeats the id, never skips ahead.
        var seen: [String] = []
        for r in receiver.received where r["ce-subject"] == "objects/\(name)" {
          let id = r["ce-id"] ?? ""
          if seen.last != id { seen.append(id) }
        }
        #expect(seen == expected)
      }
      #expect(receiver.received.count > 15)
      // The receiver answers before the deliverer records the answer: give the record a moment.
      let recorded = ContinuousClock.now + .seconds(10)
      while try !larder.events.deliveries(.pending).isEmpty && ContinuousClock.now < recorded {
        Thread.sleep(forTimeInterval: 0.02)
      }
      #expect(try larder.events.deliveries(.pending).isEmpty)
    }
  }

  /// The deliverer's bookkeeping takes the catalog's writer (which uploads commit through) once
  /// per batch: a batch's acknowledgements commit in the write that claims the next batch.
  /// One object's 19 events go out one per batch (each waits for the previous one's 2xx).
  @Test func aBatchCostsTheWriterOneTransactionAcknowledgementsIncluded() throws {
    let receiver = try WebhookReceiver()
    try withService(configure: Self.fast) { s in
      let larder = s.service.larder
      for round in 0..<10 { _ = try larder.objects.put(bucket: "app", name: "x", data: Data("\(round)".utf8)) }
      let events = try larder.events.outbox()
      #expect(events.count == 19)  // finalized, then (deleted, finalized) nine times
      func writes() -> UInt64 {
        let times = larder.catalogLockTimes()
        return times.keyedHeld.count + times.exclusiveHeld.count
      }
      let before = writes()
      let sub = try larder.events.subscribe(url: receiver.url, bucket: "app")
      #expect(try larder.events.replay(since: Date(timeIntervalSince1970: 0), subscription: sub.id) == 19)
      let got = receiver.wait { $0.count >= 19 }
      #expect(got.compactMap { $0["ce-id"] } == events.map(\.id))
      let recorded = ContinuousClock.now + .seconds(10)
      while try !larder.events.deliveries(.pending).isEmpty && ContinuousClock.now < recorded {
        Thread.sleep(forTimeInterval: 0.02)
      }
      #expect(try larder.events.deliveries(.delivered, subscription: sub.id).count == 19)
      Thread.sleep(forTimeInterval: 0.3)  // a wake-up after the last record finds nothing and writes nothing
      // subscribe + replay, one claim per event (with the previous one's acknowledgement), and
      // the claim that records the last acknowledgement and finds nothing.
      #expect(writes() - before == 2 + 19 + 1)
    }
  }

  @Test func aRedirectIsAFailureNotFollowed() throws {
    let receiver = try WebhookReceiver { _ in (302, .zero) }
    try withService(configure: Self.fast) { s in
      _ = try s.service.larder.events.subscribe(url: receiver.url, bucket: "app")
      _ = try s.service.larder.objects.put(bucket: "app", name: "x", data: Data("1".utf8))
      receiver.wait { $0.count >= 3 }
      #expect(receiver.received.allSatisfy { $0["redirected"] == nil })
      let pending = try s.service.larder.events.deliveries(.pending)
      #expect(pending.count == 1)
      #expect(pending.first?.lastError == "HTTP 302")
    }
  }

  @Test func aSlowReceiverDelaysOnlyItsOwnSubscription() throws {
    let slow = try WebhookReceiver { _ in (200, .seconds(3)) }
    let fast = try WebhookReceiver()
    try withService(configure: Self.fast) { s in
      let larder = s.service.larder
      _ = try larder.events.subscribe(url: slow.url, bucket: "app")
      _ = try larder.events.subscribe(url: fast.url, bucket: "app")
      for i in 0..<5 { _ = try larder.objects.put(bucket: "app", name: "n\(i)", data: Data("\(i)".utf8)) }
      let got = fast.wait(timeout: .seconds(10)) { $0.count >= 5 }
      #expect(got.count == 5)
      // The slow one has answered at most its first request (each takes 3 s) by then.
      #expect(slow.acknowledged.count <= 1)
    }
  }

  @Test func aTimeoutIsRetriedWithTheSameId() throws {
    let receiver = try WebhookReceiver { n in n == 0 ? (200, .seconds(3)) : (200, .zero) }
    try withService(configure: {
      Self.fast(&$0)
      $0.events.timeout = .milliseconds(500)
    }) { s in
      _ = try s.service.larder.events.subscribe(url: receiver.url, bucket: "app")
      _ = try s.service.larder.objects.put(bucket: "app", name: "x", data: Data("1".utf8))
      let got = receiver.wait { $0.count >= 2 }
      #expect(got.count >= 2)
      #expect(got.map { $0["ce-id"] }.allSatisfy { $0 == got[0]["ce-id"] })
      #expect(
        receiver.wait { _ in (try? s.service.larder.events.deliveries(.pending).isEmpty) == true }.count >= 2)
    }
  }

  @Test func structuredModeSendsOneCloudEventDocument() throws {
    let receiver = try WebhookReceiver()
    try withService(configure: Self.fast) { s in
      let sub = try s.service.larder.events.subscribe(
        url: receiver.url, bucket: "app", prefix: "in/", kinds: [.finalized], mode: .structured)
      _ = try s.service.larder.objects.put(bucket: "app", name: "out/skip", data: Data("0".utf8))
      _ = try s.service.larder.objects.put(bucket: "app", name: "in/x", data: Data("1".utf8))
      let got = receiver.wait { $0.count >= 1 }
      Thread.sleep(forTimeInterval: 0.3)
      #expect(receiver.received.count == 1)
      let r = try #require(got.first)
      #expect(r["content-type"] == "application/cloudevents+json; charset=utf-8")
      #expect(r["ce-id"] == nil)
      let document = try #require(r.json)
      #expect(document["specversion"] as? String == "1.0")
      #expect(document["type"] as? String == "google.cloud.storage.object.v1.finalized")
      #expect(document["subject"] as? String == "objects/in/x")
      #expect((document["data"] as? [String: Any])?["name"] as? String == "in/x")
      #expect(signatureIsValid(r, secret: sub.secret))
    }
  }
}

/// A stopped service lets go of its store (and with it its catalog connections): nothing the
/// deliverer or its metrics hold keeps it alive.
@Suite struct DelivererLifetimeTests {
  @Test func aStoppedServiceReleasesItsStore() throws {
    weak var released: Larder?
    do {
      let s = try LiveService(configure: WebhookDeliveryTests.fast)
      released = s.service.larder
      #expect(try s.send(.init("POST", "/v0/b/app/o?name=x", body: [1])).status == 200)
      s.close()
    }
    let deadline = ContinuousClock.now + .seconds(5)
    while released != nil && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.05) }
    #expect(released == nil)
  }
}
