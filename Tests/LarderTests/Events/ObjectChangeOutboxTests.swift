import Foundation
import Larder
import LarderTestSupport
import Testing


/// Every object change writes its events in its own transaction: one `finalized` per new
/// generation (after the `deleted` of the one it replaces), `metadataUpdated` per patch,
/// `deleted` per delete; a change that rolls back leaves none.
@Suite struct ObjectChangeOutboxTests {
  func all(_ larder: Larder) throws -> [ObjectEvent] { try larder.events.outbox() }

  /// A store subscribed to bucket `app` after a put of each of `names` in turn ("1", "2", … as
  /// contents), and its delivery queue.
  func subscribed(putting names: [String]) throws -> (Larder, EventSubscription, EventDeliveryQueue) {
    let larder = try TestStore.temporary()
    let sub = try larder.events.subscribe(url: "http://127.0.0.1:9/", bucket: "app")
    for (i, name) in names.enumerated() { _ = try larder.objects.put(bucket: "app", name: name, data: Data("\(i + 1)".utf8)) }
    try TestStore.settle(larder)
    return (larder, sub, EventDeliveryQueue(events: larder.events))
  }

  @Test func aPutWritesOneFinalizedEventWithTheObjectAsCommitted() throws {
    let larder = try TestStore.temporary()
    let object = try larder.objects.put(
      bucket: "app", name: "a/b.txt", data: Data("hello".utf8), options: .init(metadata: ["k": "v"]))
    let events = try all(larder)
    #expect(events.map(\.kind) == [.finalized])
    let event = try #require(events.first)
    #expect(event.object == object)
    #expect(event.time == object.timeCreated)
    #expect(event.timeDeleted == nil)
    #expect(event.id.count == 36)
  }

  @Test func anOverwriteWritesDeletedOfTheOldGenerationThenFinalized() throws {
    let larder = try TestStore.temporary()
    let first = try larder.objects.put(bucket: "app", name: "x", data: Data("one".utf8))
    let second = try larder.objects.put(bucket: "app", name: "x", data: Data("two!".utf8))
    let events = try all(larder)
    try #require(events.map(\.kind) == [.finalized, .deleted, .finalized])
    #expect(events[1].object == first)
    #expect(events[1].timeDeleted == second.timeCreated)
    #expect(events[2].object == second)
    #expect(events.map(\.sequence) == events.map(\.sequence).sorted())
    #expect(Set(events.map(\.id)).count == 3)
  }

  @Test func aPatchWritesMetadataUpdatedAndADeleteWritesDeleted() throws {
    let larder = try TestStore.temporary()
    _ = try larder.objects.put(bucket: "app", name: "x", data: Data("one".utf8))
    let patched = try larder.objects.update(bucket: "app", name: "x", patch: ObjectPatch(metadata: ["a": "1"]))
    try larder.objects.delete(bucket: "app", name: "x")
    let events = try all(larder)
    try #require(events.map(\.kind) == [.finalized, .metadataUpdated, .deleted])
    #expect(events[1].object == patched)
    #expect(events[1].object.metageneration == 2)
    #expect(events[2].object == patched)
    #expect(events[2].timeDeleted != nil)
    #expect(events[2].time == events[2].timeDeleted)
  }

  @Test func aCopyWritesFinalizedForTheDestination() throws {
    let larder = try TestStore.temporary()
    _ = try larder.objects.put(bucket: "app", name: "src", data: Data("one".utf8))
    let copy = try larder.objects.copy(
      from: try ObjectPath(bucket: "app", name: "src"), to: try ObjectPath(bucket: "other", name: "dst"),
      options: { _ in ObjectWriteOptions() })
    let events = try all(larder)
    try #require(events.map(\.kind) == [.finalized, .finalized])
    #expect(events[1].object == copy)
  }

  @Test func aFailedChangeLeavesNoEventAndNoDelivery() throws {
    let larder = try TestStore.temporary(
      configuration: .init(faults: FaultInjector { if $0 == .beforeCommit { throw InjectedFailure() } }))
    _ = try larder.events.subscribe(url: "http://127.0.0.1:9/", bucket: "app")
    #expect(throws: InjectedFailure.self) { try larder.objects.put(bucket: "app", name: "x", data: Data("one".utf8)) }
    #expect(try all(larder).isEmpty)
    #expect(try larder.events.deliveries(.pending).isEmpty)
    // A refused precondition rolls back too.
    #expect(throws: LarderError.self) { try larder.objects.delete(bucket: "app", name: "nothing") }
    #expect(try all(larder).isEmpty)
  }

  @Test func subscriptionsGetDeliveriesOnlyForTheirBucketPrefixAndKinds() throws {
    let larder = try TestStore.temporary()
    let photos = try larder.events.subscribe(url: "http://127.0.0.1:9/", bucket: "app", prefix: "photos/", kinds: [.finalized])
    let everything = try larder.events.subscribe(url: "https://example.test/hook", bucket: "app")
    _ = try larder.objects.put(bucket: "app", name: "photos/1.jpg", data: Data("1".utf8))
    _ = try larder.objects.put(bucket: "app", name: "docs/2.txt", data: Data("2".utf8))
    _ = try larder.objects.put(bucket: "other", name: "photos/3.jpg", data: Data("3".utf8))
    try larder.objects.delete(bucket: "app", name: "photos/1.jpg")
    let ofPhotos = try larder.events.deliveries(.pending, subscription: photos.id)
    #expect(ofPhotos.map(\.event.object.name) == ["photos/1.jpg"])
    #expect(ofPhotos.map(\.event.kind) == [.finalized])
    let ofAll = try larder.events.deliveries(.pending, subscription: everything.id)
    #expect(ofAll.map(\.event.object.name) == ["photos/1.jpg", "docs/2.txt", "photos/1.jpg"])
    #expect(ofAll.map(\.event.kind) == [.finalized, .finalized, .deleted])
    // Pending past their heads: the changes wrote their events and no row per subscription.
    #expect(try larder.catalog.read { db in try db.row("SELECT count(*) AS n FROM event_deliveries")?.int("n") } == 0)
    let backlog = try larder.events.backlog()
    #expect(Dictionary(uniqueKeysWithValues: backlog.map { ($0.subscriptionID, $0.pending) }) == [photos.id: 1, everything.id: 3])
  }

  @Test func badInputIsRefusedAndChangesNothing() throws {
    let larder = try TestStore.temporary()
    for url in ["ftp://example.test/", "file:///etc/passwd", "not a url", "http://", "gopher://x/"] {
      let error = #expect(throws: LarderError.self) { try larder.events.subscribe(url: url, bucket: "app") }
      #expect(error?.description.contains("http:// or https://") == true, "\(url)")
    }
    #expect(throws: LarderError.invalidArgument(
      "unknown event kind 'created': the kinds are finalized, deleted, metadataUpdated")) {
      _ = try ObjectChangeKind.parseList("finalized,created")
    }
    #expect(throws: LarderError.self) { try larder.events.subscribe(url: "http://x.test/", bucket: "Bad Bucket!") }
    #expect(try larder.events.subscriptions().isEmpty)
    _ = try larder.objects.put(bucket: "app", name: "x", data: Data("one".utf8))
    let replay = #expect(throws: LarderError.self) { try larder.events.replay(eventID: "no-such-event") }
    #expect(replay?.code == "not-found")
    #expect(throws: LarderError.self) { try larder.events.unsubscribe(id: "sub-nothing") }
    #expect(throws: LarderError.self) { try ObjectEventCursor("12") }
  }

  @Test func replaySendsAnEventAgainWithItsId() throws {
    let larder = try TestStore.temporary()
    let sub = try larder.events.subscribe(url: "http://127.0.0.1:9/", bucket: "app")
    _ = try larder.objects.put(bucket: "app", name: "x", data: Data("one".utf8))
    try TestStore.settle(larder)
    let queue = EventDeliveryQueue(events: larder.events)
    let claimed = try queue.claim(subscription: sub.id, owner: "t", lease: .seconds(30), limit: 10)
    try queue.record(acknowledged: claimed.deliveries, head: claimed.headEnd, subscription: sub.id, owner: "t")
    #expect(try larder.events.deliveries(.pending).isEmpty)
    let id = try #require(claimed.deliveries.first).event.id
    // A subscription made after the event never had it: a replay of it to "every subscription
    // that had it" sends it to the first one only.
    let later = try larder.events.subscribe(url: "http://127.0.0.1:9/later", bucket: "app")
    #expect(try larder.events.replay(eventID: id) == 1)
    #expect(try larder.events.deliveries(.pending, subscription: later.id).isEmpty)
    let again = try queue.claim(subscription: sub.id, owner: "t", lease: .seconds(30), limit: 10)
    #expect(again.deliveries.map(\.event.id) == [id])
    #expect(again.deliveries.map(\.fromHead) == [false])
    #expect(try larder.events.replay(since: Date(timeIntervalSince1970: 0), subscription: sub.id) == 1)
  }

  /// The head hands out an object's events in commit order (the deliverer sends them one after
  /// another); once one fails, its row is retried first of its object and the object's later
  /// events queue behind it as rows; the head and the rows are leased to their claimer.
  @Test func anObjectsEventsGoOutInOrderAndQueueBehindAFailure() throws {
    let larder = try TestStore.temporary()
    let sub = try larder.events.subscribe(url: "http://127.0.0.1:9/", bucket: "app")
    _ = try larder.objects.put(bucket: "app", name: "x", data: Data("1".utf8))
    _ = try larder.objects.put(bucket: "app", name: "x", data: Data("2".utf8))
    _ = try larder.objects.put(bucket: "app", name: "y", data: Data("3".utf8))
    try TestStore.settle(larder)
    let queue = EventDeliveryQueue(events: larder.events)
    let policy = EventRetryPolicy(firstDelay: .milliseconds(1), maxDelay: .milliseconds(1), giveUpAfter: .seconds(3600))
    func names(_ batch: EventDeliveryQueue.Batch) -> [String] {
      batch.deliveries.map { "\($0.event.kind.rawValue) \($0.event.object.name)" }
    }
    let first = try queue.claim(subscription: sub.id, owner: "a", lease: .seconds(30), limit: 10)
    #expect(names(first) == ["finalized x", "deleted x", "finalized x", "finalized y"])
    #expect(first.deliveries.allSatisfy { $0.fromHead })
    // The head is leased to a: b gets nothing.
    #expect(try queue.claim(subscription: sub.id, owner: "b", lease: .seconds(30), limit: 10).deliveries.isEmpty)
    // x's first event fails: its next two queue behind it; y is acknowledged.
    #expect(try !queue.failed(first.deliveries[0], error: "HTTP 500", policy: policy))
    try queue.queue(first.deliveries[1])
    try queue.queue(first.deliveries[2])
    Thread.sleep(forTimeInterval: 0.01)
    let retried = try queue.claim(
      subscription: sub.id, owner: "a", lease: .seconds(30), limit: 10, acknowledging: [first.deliveries[3]],
      head: first.headEnd)
    #expect(retried.deliveries.map(\.event.id) == [first.deliveries[0].event.id])
    #expect(retried.deliveries.first?.attempts == 1)
    #expect(try larder.events.deliveries(.pending).map(\.event.object.name) == ["x", "x", "x"])
    // The retried row is leased to a.
    #expect(try queue.claim(subscription: sub.id, owner: "b", lease: .seconds(30), limit: 10).deliveries.isEmpty)
    let next = try queue.claim(
      subscription: sub.id, owner: "a", lease: .seconds(30), limit: 10, acknowledging: retried.deliveries)
    #expect(names(next) == ["deleted x"])
    let last = try queue.claim(
      subscription: sub.id, owner: "a", lease: .seconds(30), limit: 10, acknowledging: next.deliveries)
    #expect(names(last) == ["finalized x"])
    #expect(try queue.claim(
      subscription: sub.id, owner: "a", lease: .seconds(30), limit: 10, acknowledging: last.deliveries).deliveries.isEmpty)
    #expect(try larder.events.deliveries(.pending).isEmpty)
    #expect(try larder.events.deliveries(.delivered).map(\.event.object.name) == ["x", "x", "x"])
  }

  /// A delivery sent at its first attempt writes nothing but the head's move, with the next
  /// claim: an upload with a subscription costs the catalog no row but its event.
  @Test func aClaimRecordsTheAcknowledgementsAndTheHeadInItsOneWrite() throws {
    let (larder, sub, queue) = try subscribed(putting: ["x", "x", "y"])
    #expect(try larder.catalog.read { db in try db.row("SELECT count(*) AS n FROM event_deliveries")?.int("n") } == 0)
    let first = try queue.claim(subscription: sub.id, owner: "a", lease: .seconds(30), limit: 10)
    #expect(first.deliveries.map(\.event.kind) == [.finalized, .deleted, .finalized, .finalized])
    let writes = larder.catalogLockTimes().exclusiveHeld.count + larder.catalogLockTimes().keyedHeld.count
    let second = try queue.claim(
      subscription: sub.id, owner: "a", lease: .seconds(30), limit: 10, acknowledging: first.deliveries,
      head: first.headEnd)
    #expect(second.deliveries.isEmpty)
    #expect(larder.catalogLockTimes().exclusiveHeld.count + larder.catalogLockTimes().keyedHeld.count == writes + 1)
    #expect(try larder.events.deliveries(.pending).isEmpty)
    #expect(try larder.events.backlog().map(\.pending) == [0])
    #expect(try larder.catalog.read { db in try db.row("SELECT count(*) AS n FROM event_deliveries")?.int("n") } == 0)
    // A wake-up with nothing past the head and nothing due writes nothing.
    #expect(try queue.claim(subscription: sub.id, owner: "b", lease: .seconds(30), limit: 10).deliveries.isEmpty)
    #expect(larder.catalogLockTimes().exclusiveHeld.count + larder.catalogLockTimes().keyedHeld.count == writes + 1)
    // The next change is handed out by the head, once.
    _ = try larder.objects.put(bucket: "app", name: "z", data: Data("z".utf8))
    try TestStore.settle(larder)
    let third = try queue.claim(subscription: sub.id, owner: "a", lease: .seconds(30), limit: 10)
    #expect(third.deliveries.map(\.event.object.name) == ["z"])
  }

  /// A head whose deliverer died (its lease ran out) is taken over: the other deliverer sends
  /// the same events, same ids; the one that lost it cannot move it any more.
  @Test func anExpiredHeadIsTakenOverAndTheLoserCannotMoveIt() throws {
    let (_, sub, queue) = try subscribed(putting: ["x", "y"])
    let first = try queue.claim(subscription: sub.id, owner: "a", lease: .milliseconds(50), limit: 10)
    #expect(first.deliveries.count == 2)
    #expect(try queue.claim(subscription: sub.id, owner: "b", lease: .seconds(30), limit: 10).deliveries.isEmpty)
    Thread.sleep(forTimeInterval: 0.1)
    let taken = try queue.claim(subscription: sub.id, owner: "b", lease: .seconds(30), limit: 10)
    #expect(taken.deliveries.map(\.event.id) == first.deliveries.map(\.event.id))
    // a comes back and reports: its head move is refused, b's batch stands.
    try queue.record(acknowledged: first.deliveries, head: first.headEnd, subscription: sub.id, owner: "a")
    let again = try queue.claim(subscription: sub.id, owner: "b", lease: .seconds(30), limit: 10)
    #expect(again.deliveries.map(\.event.id) == first.deliveries.map(\.event.id))
  }

  /// A subscription to a quiet bucket of a busy store: a claim that finds only other buckets'
  /// events past the head writes nothing and says how far it looked (the next look starts
  /// there); once a claim's scan of them has piled up, one write moves the head past them; its
  /// own event still goes out, once.
  @Test(TestCatalog.sqliteOnly) func aQuietSubscriptionCostsABusyStoreNoWritePerChange() throws {
    let larder = try TestStore.temporary()
    let sub = try larder.events.subscribe(url: "http://127.0.0.1:9/", bucket: "quiet")
    let queue = EventDeliveryQueue(events: larder.events)
    func writes() -> UInt64 {
      let times = larder.catalogLockTimes()
      return times.keyedHeld.count + times.exclusiveHeld.count
    }
    func busy(_ range: Range<Int>) throws {
      for i in range { _ = try larder.objects.put(bucket: "busy", name: "n\(i)", data: Data("\(i)".utf8)) }
    }
    /// A claim (after `seen`) that finds nothing to do: it writes nothing and says it looked up
    /// to the last event, having skipped `skipped` past the head.
    func idle(after seen: EventDeliveryQueue.Looked?, skipped: Int) throws -> EventDeliveryQueue.Looked? {
      let before = writes()
      let batch = try queue.claim(subscription: sub.id, owner: "a", lease: .seconds(30), limit: 32, seen: seen)
      #expect(batch.deliveries.isEmpty && batch.headEnd == nil)
      #expect(batch.seen?.position == (try larder.events.outbox().last?.cursor))
      #expect(batch.seen?.skipped == skipped)
      #expect(writes() == before)
      return batch.seen
    }
    try busy(0..<10)
    let first = try idle(after: nil, skipped: 10)
    // 100 more: 110 past the head, fewer than a scan (4 × 32); the look reads only the new ones.
    try busy(10..<110)
    let still = try idle(after: first, skipped: 110)
    // 140 past the head: one claim moves it past the first 128, the next records that.
    try busy(110..<140)
    var before = writes()
    let moved = try queue.claim(subscription: sub.id, owner: "a", lease: .seconds(30), limit: 32, seen: still)
    #expect(moved.deliveries.isEmpty)
    #expect(moved.headEnd == (try larder.events.outbox()[127].cursor))
    #expect(writes() == before + 1)
    _ = try larder.objects.put(bucket: "quiet", name: "mine", data: Data("m".utf8))
    before = writes()
    let mine = try queue.claim(subscription: sub.id, owner: "a", lease: .seconds(30), limit: 32, head: moved.headEnd)
    #expect(mine.deliveries.map(\.event.object.name) == ["mine"])
    #expect(writes() == before + 1)
    // Every event before it is behind the head now: prunable past the retention.
    Thread.sleep(forTimeInterval: 0.01)
    try queue.record(acknowledged: mine.deliveries, head: mine.headEnd, subscription: sub.id, owner: "a")
    #expect(try larder.events.prune(retention: .zero) == 141)
  }

  /// A subscription gets the changes committed after it was made, not those before (on
  /// PostgreSQL, where transactions commit in any order, it starts at the settled horizon: a
  /// change committed just before it, while another transaction was open, may come too).
  @Test func aSubscriptionStartsAfterTheChangesBeforeIt() throws {
    let larder = try TestStore.temporary()
    _ = try larder.objects.put(bucket: "app", name: "before", data: Data("1".utf8))
    let sub = try larder.events.subscribe(url: "http://127.0.0.1:9/", bucket: "app")
    _ = try larder.objects.put(bucket: "app", name: "after", data: Data("2".utf8))
    try TestStore.settle(larder)
    let batch = try EventDeliveryQueue(events: larder.events).claim(subscription: sub.id, owner: "a", lease: .seconds(30), limit: 10)
    let pending = try larder.events.deliveries(.pending).map(\.event.object.name)
    if try larder.catalog.read({ db in db.dialect.settledTransactionOrder == nil }) {
      #expect(batch.deliveries.map(\.event.object.name) == ["after"])
      #expect(pending == ["after"])
    } else {
      #expect(batch.deliveries.last?.event.object.name == "after")
      #expect(pending.last == "after" && pending.allSatisfy { ["before", "after"].contains($0) }, "\(pending)")
    }
  }

  /// A claim runs under the writer uploads commit through, several times a second: it must read
  /// the subscription's pending deliveries, not its whole delivered history once per candidate.
  @Test func aClaimSearchesThePendingIndexesNotTheDeliveredHistory() throws {
    let (larder, sub, queue) = try subscribed(putting: (0..<20).map { "n\($0 % 4)" })
    var handed: [String] = []
    var batch = EventDeliveryQueue.Batch(deliveries: [], headEnd: nil)
    repeat {
      batch = try queue.claim(
        subscription: sub.id, owner: "a", lease: .seconds(30), limit: 3, acknowledging: batch.deliveries,
        head: batch.headEnd)
      handed += batch.deliveries.map(\.event.id)
    } while !batch.deliveries.isEmpty
    // Every event once, each object's in commit order, though several objects share a batch.
    let events = try all(larder)
    #expect(handed.count == events.count)
    for name in ["n0", "n1", "n2", "n3"] {
      let order = events.filter { $0.object.name == name }.map(\.id)
      #expect(handed.filter { order.contains($0) } == order)
    }
    // SQLite's plans (PostgreSQL's planner is not told which index to use).
    func plan(_ sql: (any SQLDialect) -> String) throws -> [String]? {
      try larder.catalog.read { db in
        db.dialect.namesIndexes ? try db.dialect.queryPlan(sql(db.dialect), [sub.id, 1], on: db) : nil
      }
    }
    if let due = try plan({ EventDeliveryQueue.dueSQL($0, columns: "d.event_seq") }) {
      #expect(due.contains { $0.contains("SEARCH d USING INDEX event_deliveries_due (subscription_id=?)") }, "\(due)")
      #expect(
        due.contains { $0.contains("SEARCH p USING INDEX event_deliveries_pending (subscription_id=? AND bucket=? AND name=? AND event_seq<?)") },
        "\(due)")
      #expect(!due.contains { $0.contains("PRIMARY KEY (subscription_id=?") }, "\(due)")
    }
    // The head's events: a range of the outbox's primary key, each probed in the pending index.
    if let segment = try plan({ EventDeliveryQueue.segmentSQL($0, settled: false) }) {
      #expect(segment.contains { $0.contains("SEARCH e USING INTEGER PRIMARY KEY (rowid>?)") }, "\(segment)")
      #expect(
        segment.contains { $0.contains("SEARCH p USING INDEX event_deliveries_pending (subscription_id=? AND bucket=? AND name=?)") },
        "\(segment)")
      #expect(!segment.contains { $0.hasPrefix("SCAN") }, "\(segment)")
    }
  }

  /// A delivery row (a retry, a queued or replayed delivery) is written into its primary key and
  /// the two indexes of pending deliveries (the dead letters' index only when it dies), and the
  /// backlog, the dead letters and pruning still read indexes, never the delivered history.
  @Test func deliveriesCarryThreeIndexesAndTheirReadersUseThem() throws {
    let (larder, _, _) = try subscribed(putting: ["x", "y"])
    let plans = try larder.catalog.read { db -> (Bool, [String], [[String]])? in
      guard db.dialect.namesIndexes else { return nil }  // SQLite's plans and index list
      let indexes = try db.rows("PRAGMA index_list(event_deliveries)").compactMap { $0.string("name") }
      return (
        true, indexes.sorted(),
        [
          try db.dialect.queryPlan(ObjectEvents.backlogSQL(state: "pending"), [], on: db),
          try db.dialect.queryPlan(ObjectEvents.backlogSQL(state: "dead"), [], on: db),
          try db.dialect.queryPlan(ObjectEvents.pruneEventsSQL(db.dialect), [0], on: db),
        ]
      )
    }
    guard let (_, indexes, plan) = plans else { return }
    #expect(
      indexes == [
        "event_deliveries_dead", "event_deliveries_due", "event_deliveries_pending", "sqlite_autoindex_event_deliveries_1",
      ])
    #expect(plan[0].first == "SCAN d USING INDEX event_deliveries_due", "\(plan[0])")
    #expect(plan[1].first == "SCAN d USING INDEX event_deliveries_dead", "\(plan[1])")
    #expect(
      plan[2].contains { $0.contains("SEARCH d USING PRIMARY KEY (subscription_id=? AND event_seq=?)") }, "\(plan[2])")
    #expect(!plan.joined().contains { $0 == "SCAN d" }, "\(plan)")
  }

  /// A catalog of schema version 16 (five indexes on deliveries, a row fanned out per change and
  /// subscription, no heads) with a pending and a dead delivery migrates to three indexes and
  /// heads, and keeps both: the backlog, the lists and pruning see them, once.
  @Test(TestCatalog.sqliteOnly) func migratingAwayTheTwoIndexesKeepsPendingAndDeadDeliveries() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-outbox-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    do {
      let larder = try TestStore.open(at: directory)
      let sub = try larder.events.subscribe(url: "http://127.0.0.1:9/", bucket: "app")
      for name in ["x", "y"] { _ = try larder.objects.put(bucket: "app", name: name, data: Data(name.utf8)) }
      try TestStore.settle(larder)
    let queue = EventDeliveryQueue(events: larder.events)
      let claimed = try queue.claim(subscription: sub.id, owner: "a", lease: .seconds(30), limit: 1)
      #expect(
        try queue.failed(
          claimed.deliveries[0], error: "HTTP 500", policy: EventRetryPolicy(firstDelay: .seconds(10), giveUpAfter: .seconds(1))))
      let y = try #require(try larder.events.outbox().last)
      try larder.catalog.write { db in
        // y's row as version 16 fanned it out when y committed.
        try db.execute(
          """
          INSERT INTO event_deliveries(subscription_id, event_seq, bucket, name, state, attempts, next_attempt_at)
          VALUES (?, ?, 'app', 'y', 'pending', 0, 0)
          """, [sub.id, y.sequence])
        try db.executeScript(
          """
          DROP INDEX event_deliveries_dead;
          CREATE INDEX event_deliveries_by_event ON event_deliveries(event_seq);
          CREATE INDEX event_deliveries_undelivered ON event_deliveries(subscription_id, state) WHERE state <> 'delivered';
          ALTER TABLE event_subscriptions DROP COLUMN head_order;
          ALTER TABLE event_subscriptions DROP COLUMN head_seq;
          ALTER TABLE event_subscriptions DROP COLUMN head_owner;
          ALTER TABLE event_subscriptions DROP COLUMN head_until;
          PRAGMA user_version = 16;
          """)
      }
      try larder.checkpoint()
    }
    let larder = try TestStore.open(at: directory)
    let indexes = try larder.catalog.read { db in
      try db.rows("PRAGMA index_list(event_deliveries)").compactMap { $0.string("name") }.sorted()
    }
    #expect(indexes == ["event_deliveries_dead", "event_deliveries_due", "event_deliveries_pending", "sqlite_autoindex_event_deliveries_1"])
    #expect(try larder.events.backlog().map { [$0.pending, $0.dead] } == [[1, 1]])
    #expect(try larder.events.deliveries(.dead).map(\.event.object.name) == ["x"])
    #expect(try larder.events.deliveries(.pending).map(\.event.object.name) == ["y"])
    #expect(try larder.events.prune(retention: .zero) == 0)
    #expect(try all(larder).map(\.object.name) == ["x", "y"])
    // The head starts after both (y goes out from its row, once); a later change from the head.
    _ = try larder.objects.put(bucket: "app", name: "z", data: Data("z".utf8))
    let batch = try EventDeliveryQueue(events: larder.events).claim(
      subscription: try #require(try larder.events.subscriptions().first).id, owner: "a", lease: .seconds(30), limit: 10)
    #expect(batch.deliveries.map { "\($0.event.object.name) \($0.fromHead)" } == ["y false", "z true"])
  }

  @Test func aDeliveryFailingPastTheRetryWindowIsDeadAndKept() throws {
    let larder = try TestStore.temporary()
    let sub = try larder.events.subscribe(url: "http://127.0.0.1:9/", bucket: "app")
    _ = try larder.objects.put(bucket: "app", name: "x", data: Data("1".utf8))
    try TestStore.settle(larder)
    let queue = EventDeliveryQueue(events: larder.events)
    let claimed = try queue.claim(subscription: sub.id, owner: "a", lease: .seconds(30), limit: 10).deliveries
    let dead = try queue.failed(
      claimed[0], error: "HTTP 503", policy: EventRetryPolicy(firstDelay: .seconds(10), giveUpAfter: .seconds(5)))
    #expect(dead)
    let letters = try larder.events.deliveries(.dead)
    #expect(letters.map(\.event.id) == [claimed[0].event.id])
    #expect(try larder.events.deliveries(.pending).isEmpty)
    #expect(letters.first?.lastError == "HTTP 503")
    #expect(try larder.events.backlog().map(\.dead) == [1])
    // Pruning keeps dead letters' events.
    #expect(try larder.events.prune(retention: .zero) == 0)
    #expect(try larder.events.deliveries(.dead).count == 1)
  }

  @Test func theRetryDelayDoublesUpToItsCeiling() {
    let policy = EventRetryPolicy()
    #expect((1...8).map { policy.delay(afterAttempt: $0) } == [10, 20, 40, 80, 160, 320, 600, 600].map { .seconds($0) })
  }

  @Test func pruningRemovesDeliveredEventsPastTheRetentionOnly() throws {
    let (larder, sub, queue) = try subscribed(putting: ["x", "y"])
    let claimed = try queue.claim(subscription: sub.id, owner: "a", lease: .seconds(30), limit: 1)
    try queue.record(acknowledged: claimed.deliveries, head: claimed.headEnd, subscription: sub.id, owner: "a")
    #expect(try larder.events.prune() == 0)
    Thread.sleep(forTimeInterval: 0.01)
    #expect(try larder.events.prune(retention: .zero) == 1)
    #expect(try all(larder).map(\.object.name) == ["y"])
    #expect(try larder.events.deliveries(.pending).map(\.event.object.name) == ["y"])
  }

  @Test func theChangeSequenceResumesFromACursor() async throws {
    let larder = try TestStore.temporary()
    _ = try larder.objects.put(bucket: "app", name: "a", data: Data("1".utf8))
    var iterator = larder.events.changes().makeAsyncIterator()
    let first = try #require(try await iterator.next())
    #expect(first.object.name == "a")
    _ = try larder.objects.put(bucket: "app", name: "b", data: Data("2".utf8))
    let second = try #require(try await iterator.next())
    #expect(second.object.name == "b")
    // After a restart, from the saved cursor: only what followed.
    _ = try larder.objects.put(bucket: "app", name: "c", data: Data("3".utf8))
    var resumed = larder.events.changes(after: try ObjectEventCursor(second.cursor.description)).makeAsyncIterator()
    #expect(try await resumed.next()?.object.name == "c")
  }
}
