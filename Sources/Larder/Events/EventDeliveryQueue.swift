import Foundation

/// What a deliverer takes from the outbox and reports back, on the catalog's clock.
///
/// Per subscription and object only the oldest pending event is ever handed out, so an object's
/// next event waits until the previous one is acknowledged (or dead). A handed-out delivery is
/// leased: until the lease runs out no other deliverer (thread, process or node) takes it, and
/// once it has run out (its deliverer died mid-delivery) another one sends it again, same id.
/// Claims and reports of one subscription are keyed writes (``WriteKey/subscription(id:)``),
/// committed lazily (``Catalog/write(keys:releasingReserve:durable:_:)``): a claim or an
/// acknowledgement a machine crash loses means the event is sent again, which at-least-once
/// delivery allows; an fsync per claim and per acknowledgement would double the commits an
/// upload costs while a subscription is active.
package struct EventDeliveryQueue: Sendable {
  let catalog: Catalog

  package init(events: ObjectEvents) { catalog = events.catalog }

  /// Records `acknowledging` (deliveries of `subscription` a 2xx acknowledged) and then hands
  /// out its pending deliveries that are due, not leased and first of their object, leased to
  /// `owner` for `lease`; oldest first, at most `limit`. One write for both, so a busy deliverer
  /// costs the writer one transaction per batch, not two; the acknowledgements go first, so an
  /// object's next event can be handed out by the same call.
  package func claim(
    subscription: String, owner: String, lease: Duration, limit: Int, acknowledging: [EventDelivery] = []
  ) throws -> [EventDelivery] {
    func due(_ db: Database, columns: String, limit: Int) throws -> [Row] {
      try db.rows(Self.dueSQL(db.dialect, columns: columns), [subscription, limit])
    }
    // Most wake-ups find nothing due: look without the write lock first (uploads need it).
    // With acknowledgements to record the write happens anyway, and they may free an object's next event.
    if acknowledging.isEmpty {
      guard try catalog.read(snapshot: false, { db in try !due(db, columns: "d.event_seq", limit: 1).isEmpty }) else {
        return []
      }
    }
    let rows = try catalog.write(keys: [.subscription(id: subscription)], durable: false) { db in
      try Self.markDelivered(acknowledging, subscription: subscription, db: db)
      let rows = try due(
        db, columns: "d.subscription_id, d.state, d.attempts, d.next_attempt_at, d.last_error, d.delivered_at, e.*",
        limit: limit)
      if !rows.isEmpty {
        var arguments: [any SQLBindable] = [owner, Self.milliseconds(lease), subscription]
        arguments += rows.map { $0.int("seq") ?? 0 }
        try db.execute(
          """
          UPDATE event_deliveries SET lease_owner = ?, lease_until = \(db.dialect.nowMilliseconds) + ?
          WHERE subscription_id = ? AND event_seq IN (\(Self.placeholders(rows.count)))
          """, arguments)
      }
      return rows
    }
    // Decoded after the commit: the writer is not held for JSON.
    return try rows.map(ObjectEvents.delivery(row:))
  }

  /// Records the 2xx answers that acknowledged `deliveries` (of one subscription), in one write.
  package func delivered(_ deliveries: [EventDelivery]) throws {
    guard let subscription = deliveries.first?.subscriptionID else { return }
    try catalog.write(keys: [.subscription(id: subscription)], durable: false) { db in
      try Self.markDelivered(deliveries, subscription: subscription, db: db)
    }
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
  /// Gives back every lease `owner` holds (a deliverer stopping cleanly).
  package func release(owner: String) throws {
    try catalog.write { db in
      try db.execute(
        "UPDATE event_deliveries SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ? AND state = 'pending'",
        [owner])
    }
  }
}
