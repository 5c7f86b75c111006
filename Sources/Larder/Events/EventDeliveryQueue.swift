import Foundation

/// What a deliverer takes from the outbox and reports back, on the catalog's clock.
///
/// A subscription reads the outbox from its **head**, a position in commit order: the events
/// past it that it asked for are sent in order, and a 2xx moves the head past them — nothing is
/// written per event or per subscription when a change commits, and nothing per delivered event
/// after. A delivery gets a **row** (`event_deliveries`) only when it needs one: its first
/// attempt failed (retried from the row, or dead), it is queued behind such a row (an object's
/// next event waits until the previous one is acknowledged or dead), or it was replayed. Rows are
/// handed out first of their object, oldest first, as before the head existed.
///
/// The head and every handed-out row are leased: until a lease runs out no other deliverer
/// (thread, process or node) takes them, and once it has (its deliverer died mid-delivery)
/// another one sends them again, same id; a head whose lease was taken over is not moved by the
/// deliverer that lost it. Claims and reports of one subscription are keyed writes
/// (``WriteKey/subscription(id:)``), committed lazily (``Catalog/write(keys:releasingReserve:durable:_:)``):
/// a claim or an acknowledgement a machine crash loses means the event is sent again, which
/// at-least-once delivery allows.
package struct EventDeliveryQueue: Sendable {
  let catalog: Catalog

  package init(events: ObjectEvents) { catalog = events.catalog }

  /// What one claim hands out.
  package struct Batch: Sendable {
    /// Rows due (oldest first), then the events from the head (in commit order).
    package var deliveries: [EventDelivery]
    /// Where the head may move once every delivery from it is handled (acknowledged, or
    /// recorded failed or queued): past every event the claim looked at. Nil: the head was not
    /// read (another deliverer holds it) or nothing was past it.
    package var headEnd: ObjectEventCursor?
    /// When there was nothing to do: how far past the head the claim looked and found only
    /// events the subscription did not ask for (pass it to the next claim, which then reads only
    /// what committed since).
    package var seen: Looked?

    package init(deliveries: [EventDelivery], headEnd: ObjectEventCursor?, seen: Looked? = nil) {
      self.deliveries = deliveries
      self.headEnd = headEnd
      self.seen = seen
    }
  }

  /// How far past a subscription's head a look found only events it did not ask for, and how many.
  package struct Looked: Sendable, Equatable {
    package var position: ObjectEventCursor
    package var skipped: Int
  }

  /// What a look without the write lock found.
  private enum Look {
    case work
    case idle(seen: Looked?)
  }

  /// Whether `subscription` has work for `owner`: a row due, or (when no other deliverer holds
  /// the head) an event it asked for among the next `scan` past its head — or past `seen`, up to
  /// which earlier looks found none — or `scan` events past the head it did not ask for (the head
  /// moves past them in one write, so the outbox can be pruned behind it). Otherwise it is idle
  /// and says how far it looked, so the next look reads only what committed since: a
  /// subscription to a quiet bucket costs a busy store neither a write per commit nor a rescan of
  /// what it skipped. Where commits settle out of order (PostgreSQL) it counts only what is below
  /// the settled horizon, and waits up to a second for events it asked for that committed to
  /// settle, as the feed waits (``ObjectEvents/feed(after:limit:)``).
  private func look(subscription: String, owner: String, after seen: Looked?, scan: Int) throws -> Look {
    let deadline = ContinuousClock.now + .seconds(1)
    while true {
      let found = try catalog.read(snapshot: false) { db -> (due: Bool, rows: [Row], settled: Int64?, skipped: Int)? in
        if try !db.rows(Self.dueSQL(db.dialect, columns: "d.event_seq"), [subscription, 1]).isEmpty {
          return (true, [], nil, 0)
        }
        guard
          let head = try db.row(
            """
            SELECT head_order, head_seq FROM event_subscriptions
            WHERE id = ? AND (head_owner IS NULL OR head_owner = ? OR head_until < \(db.dialect.nowMilliseconds))
            """, [subscription, owner])
        else { return nil }  // another deliverer's head (or no such subscription)
        var from = ObjectEventCursor(transactionOrder: head.int("head_order") ?? 0, sequence: head.int("head_seq") ?? 0)
        var skipped = 0
        if let seen, (seen.position.transactionOrder, seen.position.sequence) > (from.transactionOrder, from.sequence) {
          (from, skipped) = (seen.position, seen.skipped)
        }
        let settled = try ObjectEvents.settledOrder(db)
        let position: [any SQLBindable] =
          settled == nil ? [from.sequence] : [from.transactionOrder, from.sequence]
        return (false, try db.rows(Self.lookSQL(db.dialect), [subscription] + position + [scan]), settled, skipped)
      }
      guard let found else { return .idle(seen: seen) }
      if found.due { return .work }
      let ready = found.rows.prefix { row in found.settled.map { (row.int("tx_order") ?? 0) < $0 } ?? true }
      let skipped = found.skipped + ready.count
      if skipped >= scan { return .work }
      // What it asked for that committed is waited for until it settles, so one claim takes it all.
      let awaited = found.rows.dropFirst(ready.count).contains { $0.int("wanted") == 1 }
      if awaited && ContinuousClock.now < deadline {
        Thread.sleep(forTimeInterval: 0.02)
        continue
      }
      if ready.contains(where: { $0.int("wanted") == 1 }) { return .work }
      let looked = ready.last.map { Looked(position: ObjectEventCursor(row: $0), skipped: skipped) }
      return .idle(seen: looked ?? seen)
    }
  }

  /// The next events (at most `?`) past a position (`?`: a sequence; on PostgreSQL `?, ?`: a
  /// transaction order and a sequence) in commit order, each with whether the subscription (the
  /// first `?`) asked for it.
  static func lookSQL(_ dialect: any SQLDialect) -> String {
    let serial = dialect.settledTransactionOrder == nil
    return """
      SELECT e.tx_order, e.seq, CASE WHEN \(ObjectEvents.matching) THEN 1 ELSE 0 END AS wanted
      FROM event_subscriptions s, object_events e
      WHERE s.id = ? AND \(serial ? "e.seq > ?" : "(e.tx_order, e.seq) > (?, ?)")
      ORDER BY \(ObjectEvents.commitOrder(dialect)) LIMIT ?
      """
  }

  /// Records `acknowledging` (deliveries of `subscription` a 2xx acknowledged) and moves its head
  /// to `head` (the events before it handled), and then hands out its work, at most `limit`
  /// deliveries leased to `owner` for `lease`: its rows that are due, not leased and first of
  /// their object; then, if no other deliverer holds the head, the events past it that it asked
  /// for — an event whose object has a pending row is queued behind it as a row of its own
  /// instead. One write for all of it, so a busy deliverer costs the writer one transaction per
  /// batch; the acknowledgements go first, so an object's next event can be handed out by the
  /// same call. `seen`: where the last claim that found nothing to do had looked (``Batch/seen``).
  package func claim(
    subscription: String, owner: String, lease: Duration, limit: Int, acknowledging: [EventDelivery] = [],
    head handled: ObjectEventCursor? = nil, seen: Looked? = nil
  ) throws -> Batch {
    let rowsAcknowledged = acknowledging.filter { !$0.fromHead }
    // Most wake-ups find nothing to do: look without the write lock first (uploads need it).
    // With something to record the write happens anyway, and it may free an object's next event.
    if rowsAcknowledged.isEmpty && handled == nil,
      case .idle(let looked) = try look(subscription: subscription, owner: owner, after: seen, scan: 4 * limit)
    {
      return Batch(deliveries: [], headEnd: nil, seen: looked)
    }
    let milliseconds = Self.milliseconds(lease)
    let (due, fromHead, headEnd) = try catalog.write(keys: [.subscription(id: subscription)], durable: false) {
      db -> ([Row], [Row], ObjectEventCursor?) in
      // Settled first: once this transaction has written, PostgreSQL counts it as still open.
      let settled = try ObjectEvents.settledOrder(db)
      try Self.record(rowsAcknowledged, head: handled, subscription: subscription, owner: owner, db: db)
      let now = db.dialect.nowMilliseconds
      let rows = try db.rows(
        Self.dueSQL(
          db.dialect, columns: "d.subscription_id, d.state, d.attempts, d.next_attempt_at, d.last_error, d.delivered_at, e.*"),
        [subscription, limit])
      if !rows.isEmpty {
        var arguments: [any SQLBindable] = [owner, milliseconds, subscription]
        arguments += rows.map { $0.int("seq") ?? 0 }
        try db.execute(
          """
          UPDATE event_deliveries SET lease_owner = ?, lease_until = \(now) + ?
          WHERE subscription_id = ? AND event_seq IN (\(Self.placeholders(rows.count)))
          """, arguments)
      }
      guard rows.count < limit else { return (rows, [], nil) }
      try db.execute(
        """
        UPDATE event_subscriptions SET head_owner = ?, head_until = \(now) + ?
        WHERE id = ? AND (head_owner IS NULL OR head_owner = ? OR head_until < \(now))
        """, [owner, milliseconds, subscription, owner])
      guard db.changes == 1 else { return (rows, [], nil) }
      var arguments: [any SQLBindable] = [subscription]
      if let settled { arguments.append(settled) }
      arguments.append(4 * limit)
      var sending: [Row] = []
      var end: ObjectEventCursor?
      for row in try db.rows(Self.segmentSQL(db.dialect, settled: settled != nil), arguments) {
        guard rows.count + sending.count < limit else { break }
        switch row.int("disposition") {
        case Self.queued:
          try Self.queue(
            subscription: subscription, sequence: row.int("seq") ?? 0, bucket: row.string("bucket") ?? "",
            name: row.string("name") ?? "", db: db)
        case Self.toSend: sending.append(row)
        default: break  // not asked for, or it has a row already (replayed; queued or failed before a crash)
        }
        end = ObjectEventCursor(row: row)
      }
      return (rows, sending, end)
    }
    // Decoded after the commit: the writer is not held for JSON.
    var deliveries = try due.map(ObjectEvents.delivery(row:))
    for row in fromHead {
      let event = try ObjectEvents.event(row: row)
      deliveries.append(
        EventDelivery(
          subscriptionID: subscription, event: event, state: .pending, attempts: 0, nextAttemptAt: event.time,
          lastError: nil, deliveredAt: nil, fromHead: true))
    }
    return Batch(deliveries: deliveries, headEnd: headEnd)
  }

  /// What the head's next events are to `subscription` (`?`): 0 not asked for, 1 it has a row
  /// already, 2 to be queued behind a pending row of its object, 3 to be sent.
  static let toSend: Int64 = 3
  static let queued: Int64 = 2

  /// The events past a subscription's head (`?`), in commit order, at most `?`, each with its
  /// disposition (``toSend``, ``queued``); on PostgreSQL only those of transactions before the
  /// settled horizon (`?`, before the limit), so the head never passes an event still to commit.
  package static func segmentSQL(_ dialect: any SQLDialect, settled: Bool) -> String {
    """
    SELECT e.*, CASE WHEN NOT (\(ObjectEvents.matching)) THEN 0
        WHEN EXISTS (SELECT 1 FROM event_deliveries o WHERE o.subscription_id = s.id AND o.event_seq = e.seq) THEN 1
        WHEN EXISTS (
          SELECT 1 FROM event_deliveries p \(named("event_deliveries_pending", dialect))
          WHERE p.subscription_id = s.id AND p.bucket = e.bucket AND p.name = e.name AND p.state = 'pending') THEN 2
        ELSE 3 END AS disposition
    FROM event_subscriptions s JOIN object_events e ON \(ObjectEvents.afterHead(dialect))
    WHERE s.id = ?\(settled ? " AND e.tx_order < ?" : "")
    ORDER BY \(ObjectEvents.commitOrder(dialect)) LIMIT ?
    """
  }

  /// Records the 2xx answers that acknowledged `deliveries` of `subscription` and moves its head
  /// to `head`, in one write (a deliverer stopping).
  package func record(acknowledged deliveries: [EventDelivery], head: ObjectEventCursor?, subscription: String, owner: String)
    throws
  {
    let rows = deliveries.filter { !$0.fromHead }
    guard !rows.isEmpty || head != nil else { return }
    try catalog.write(keys: [.subscription(id: subscription)], durable: false) { db in
      try Self.record(rows, head: head, subscription: subscription, owner: owner, db: db)
    }
  }

  /// Marks the rows `acknowledged` delivered and moves the head to `head`, if `owner` still
  /// holds it (one that lost it to another deliverer moves nothing: that one sends them again).
  private static func record(
    _ acknowledged: [EventDelivery], head: ObjectEventCursor?, subscription: String, owner: String, db: Database
  ) throws {
    try markDelivered(acknowledged, subscription: subscription, db: db)
    guard let head else { return }
    try db.execute(
      "UPDATE event_subscriptions SET head_order = ?, head_seq = ? WHERE id = ? AND head_owner = ?",
      [head.transactionOrder, head.sequence, subscription, owner])
  }

  /// Queues `delivery` (from the head) behind a failed delivery of its object: a pending row,
  /// sent once that one is acknowledged or dead.
  package func queue(_ delivery: EventDelivery) throws {
    try catalog.write(keys: [.subscription(id: delivery.subscriptionID)]) { db in
      try Self.queue(
        subscription: delivery.subscriptionID, sequence: delivery.event.sequence, bucket: delivery.event.object.bucket,
        name: delivery.event.object.name, db: db)
    }
  }

  /// A pending row for event `sequence` of `bucket`/`name` (none if it has one already): sent
  /// once it is the first pending of its object.
  private static func queue(subscription: String, sequence: Int64, bucket: String, name: String, db: Database) throws {
    try db.execute(
      """
      INSERT INTO event_deliveries(subscription_id, event_seq, bucket, name, state, attempts, next_attempt_at)
      VALUES (?, ?, ?, ?, 'pending', 0, \(db.dialect.nowMilliseconds)) ON CONFLICT(subscription_id, event_seq) DO NOTHING
      """, [subscription, sequence, bucket, name])
  }

  /// Marks `deliveries` delivered in one statement.
  private static func markDelivered(_ deliveries: [EventDelivery], subscription: String, db: Database) throws {
    guard !deliveries.isEmpty else { return }
    var arguments: [any SQLBindable] = [subscription]
    arguments += deliveries.map(\.event.sequence)
    try db.execute(
      """
      UPDATE event_deliveries SET state = 'delivered', attempts = attempts + 1,
        delivered_at = \(db.dialect.nowMilliseconds), lease_owner = NULL, lease_until = NULL, last_error = NULL
      WHERE subscription_id = ? AND state = 'pending' AND event_seq IN (\(placeholders(deliveries.count)))
      """, arguments)
  }

  /// `?, ?, …`: `count` bound parameters.
  private static func placeholders(_ count: Int) -> String {
    Array(repeating: "?", count: count).joined(separator: ", ")
  }

  /// Gives back the leases of `deliveries` (claimed, not sent), so they go out at once.
  package func release(_ deliveries: [EventDelivery], owner: String) throws {
    let deliveries = deliveries.filter { !$0.fromHead }  // the head's stay behind it, not leased one by one
    guard let subscription = deliveries.first?.subscriptionID else { return }
    try catalog.write(keys: [.subscription(id: subscription)], durable: false) { db in
      for delivery in deliveries {
        try db.execute(
          """
          UPDATE event_deliveries SET lease_owner = NULL, lease_until = NULL
          WHERE subscription_id = ? AND event_seq = ? AND lease_owner = ?
          """, [subscription, delivery.event.sequence, owner])
      }
    }
  }

  /// Records a failed attempt: the delivery is retried after the policy's delay, or dead once
  /// its event is older than the policy gives up after. Returns whether it is dead now.
  @discardableResult
  package func failed(_ delivery: EventDelivery, error: String, policy: EventRetryPolicy) throws -> Bool {
    try catalog.write(keys: [.subscription(id: delivery.subscriptionID)]) { db in
      let now = try db.row("SELECT \(db.dialect.nowMilliseconds) AS now")?.int("now") ?? 0
      let attempts = delivery.attempts + 1
      let next = now + Self.milliseconds(policy.delay(afterAttempt: attempts))
      let eventMillis = Int64((delivery.event.time.timeIntervalSince1970 * 1000).rounded())
      let dead = next - eventMillis > Self.milliseconds(policy.giveUpAfter)
      if delivery.fromHead {
        try db.execute(
          """
          INSERT INTO event_deliveries(subscription_id, event_seq, bucket, name, state, attempts, next_attempt_at, last_error)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(subscription_id, event_seq) DO NOTHING
          """,
          [
            delivery.subscriptionID, delivery.event.sequence, delivery.event.object.bucket, delivery.event.object.name,
            dead ? "dead" : "pending", attempts, next, String(error.prefix(500)),
          ])
        return dead
      }
      try db.execute(
        """
        UPDATE event_deliveries SET state = ?, attempts = ?, next_attempt_at = ?, lease_owner = NULL,
          lease_until = NULL, last_error = ?
        WHERE subscription_id = ? AND event_seq = ? AND state = 'pending'
        """,
        [
          dead ? "dead" : "pending", attempts, next, String(error.prefix(500)), delivery.subscriptionID,
          delivery.event.sequence,
        ])
      return dead
    }
  }

  /// How long until `subscription`'s next delivery is due (first of its object, retry time or
  /// lease run out); nil when it has none pending.
  package func nextDue(subscription: String) throws -> Duration? {
    try catalog.read { db in
      let now = db.dialect.nowMilliseconds
      let row = try db.row(
        """
        SELECT min(CASE WHEN d.lease_until IS NOT NULL AND d.lease_until > d.next_attempt_at
                        THEN d.lease_until ELSE d.next_attempt_at END) - \(now) AS wait
        FROM event_deliveries d \(Self.named("event_deliveries_due", db.dialect))
        WHERE d.subscription_id = ? AND d.state = 'pending' AND \(Self.firstOfItsObject(db.dialect))
        """, [subscription])
      return row?.int("wait").map { .milliseconds(max(0, $0)) }
    }
  }

  /// The due deliveries of a subscription (`?`), oldest first, at most `?`: pending, due, not
  /// leased, first of their object. It reads the partial indexes of pending deliveries only
  /// (named to SQLite, whose planner without statistics would scan the subscription's whole
  /// history through the primary key, delivered rows included, once per candidate).
  package static func dueSQL(_ dialect: any SQLDialect, columns: String) -> String {
    let now = dialect.nowMilliseconds
    return """
      SELECT \(columns) FROM event_deliveries d \(named("event_deliveries_due", dialect))
        JOIN object_events e ON e.seq = d.event_seq
      WHERE d.subscription_id = ? AND d.state = 'pending' AND d.next_attempt_at <= \(now)
        AND (d.lease_until IS NULL OR d.lease_until < \(now)) AND \(firstOfItsObject(dialect))
      ORDER BY d.event_seq LIMIT ?
      """
  }

  /// That no earlier event of the same object is pending for the subscription of `d`.
  private static func firstOfItsObject(_ dialect: any SQLDialect) -> String {
    """
    NOT EXISTS (
      SELECT 1 FROM event_deliveries p \(named("event_deliveries_pending", dialect))
      WHERE p.subscription_id = d.subscription_id AND p.bucket = d.bucket AND p.name = d.name
        AND p.state = 'pending' AND p.event_seq < d.event_seq)
    """
  }

  private static func named(_ index: String, _ dialect: any SQLDialect) -> String {
    dialect.namesIndexes ? "INDEXED BY \(index)" : ""
  }

  static func milliseconds(_ duration: Duration) -> Int64 {
    duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
  }
}

extension EventDeliveryQueue {
  /// Gives back every lease `owner` holds, heads included (a deliverer stopping cleanly).
  package func release(owner: String) throws {
    try catalog.write { db in
      try db.execute(
        "UPDATE event_deliveries SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ? AND state = 'pending'",
        [owner])
      try db.execute("UPDATE event_subscriptions SET head_owner = NULL, head_until = NULL WHERE head_owner = ?", [owner])
    }
  }
}
