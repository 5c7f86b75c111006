import Foundation
import LarderCrypto

/// Object-change events: webhook subscriptions, their deliveries, and the feed of the outbox.
///
/// Every change of an object writes its event in the change's own transaction
/// (``ObjectChangeOutbox``); a deliverer (the server's) sends each to the subscriptions that
/// match it, at least once and in order per object.
/// ```swift
/// let made = try larder.events.subscribe(url: "http://127.0.0.1:8081/", bucket: "app", kinds: [.finalized])
/// print(made.id, made.secret)   // the secret is shown once
/// let page = try larder.events.feed(after: .start)
/// ```
public struct ObjectEvents: Sendable {
  let catalog: Catalog

  /// Subscriptions listed by one ``subscriptions()`` call at most (labels stay bounded).
  public static let maxSubscriptions = 100

  // MARK: Subscriptions

  /// Makes a subscription; its secret is in the answer and nowhere else afterwards but the catalog.
  /// - Throws: ``LarderError/invalidArgument(_:)`` for a URL that is not http(s), a bad bucket
  ///   or prefix, no kinds, or too many subscriptions (nothing is made).
  public func subscribe(
    url: String, bucket: String, prefix: String = "", kinds: [ObjectChangeKind] = ObjectChangeKind.allCases,
    mode: EventSubscription.Mode = .binary
  ) throws -> EventSubscription {
    try Self.validate(url: url)
    try ObjectName.validateBucket(bucket)
    guard prefix.utf8.count <= ObjectName.maxNameBytes else {
      throw LarderError.invalidArgument("prefix is longer than \(ObjectName.maxNameBytes) bytes")
    }
    guard !kinds.isEmpty else { throw LarderError.invalidArgument("a subscription needs at least one event kind") }
    let subscription = EventSubscription(
      id: "sub-" + Hex.encode(SecureRandom.bytes(8)), url: url, bucket: bucket, prefix: prefix, kinds: kinds,
      mode: mode, secret: EventSubscription.secretPrefix + Data(SecureRandom.bytes(24)).base64EncodedString(),
      createdAt: Date.nowInMilliseconds)
    try catalog.write { db in
      let count = try db.row("SELECT count(*) AS n FROM event_subscriptions")?.int("n") ?? 0
      guard count < Self.maxSubscriptions else {
        throw LarderError.invalidArgument("a store has at most \(Self.maxSubscriptions) subscriptions")
      }
      let head = try Self.endOfOutbox(db)
      try db.execute(
        """
        INSERT INTO event_subscriptions(id, url, bucket, prefix, kinds, mode, secret, created_at, head_order, head_seq)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        [
          subscription.id, url, bucket, prefix, EventSubscription.storedKinds(kinds), mode.rawValue,
          subscription.secret, subscription.createdAt, head.transactionOrder, head.sequence,
        ])
    }
    return subscription
  }

  /// Only `http://` and `https://` URLs with a host: a subscription is a request the server
  /// makes, so nothing else (`file:`, `gopher:`) may be named.
  static func validate(url: String) throws(LarderError) {
    guard url.utf8.count <= 2048, let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(),
      scheme == "http" || scheme == "https", let host = parts.host, !host.isEmpty,
      !url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7f })
    else {
      throw .invalidArgument("a subscription URL must be http:// or https:// with a host, got '\(url.prefix(100))'")
    }
  }

  /// Every subscription, oldest first.
  public func subscriptions() throws -> [EventSubscription] {
    try catalog.read { db in
      try db.rows("SELECT * FROM event_subscriptions ORDER BY created_at, id").map(EventSubscription.init(row:))
    }
  }

  /// The subscription `id`.
  /// - Throws: ``LarderError/eventNotFound(_:)``.
  public func subscription(id: String) throws -> EventSubscription {
    guard let row = try catalog.read({ db in try db.row("SELECT * FROM event_subscriptions WHERE id = ?", [id]) }) else {
      throw LarderError.eventNotFound("no subscription '\(id.prefix(80))'")
    }
    return EventSubscription(row: row)
  }

  /// Removes a subscription and its deliveries (pending and dead); its events stay in the outbox.
  /// - Throws: ``LarderError/eventNotFound(_:)``.
  public func unsubscribe(id: String) throws {
    try catalog.write { db in
      try db.execute("DELETE FROM event_deliveries WHERE subscription_id = ?", [id])
      try db.execute("DELETE FROM event_subscriptions WHERE id = ?", [id])
      guard db.changes == 1 else { throw LarderError.eventNotFound("no subscription '\(id.prefix(80))'") }
    }
  }

  // MARK: Deliveries

  /// Deliveries in `state` (of one subscription, or all), oldest event first, at most `limit`.
  ///
  /// Pending: the deliveries waiting for a retry or queued behind one, and every matching event
  /// past the subscription's head (not sent yet). Delivered: only those that had a row (retried,
  /// queued or replayed) — an event acknowledged at its first attempt leaves none, the head
  /// moving past it is its record.
  public func deliveries(_ state: EventDelivery.State, subscription: String? = nil, limit: Int = 1000) throws
    -> [EventDelivery]
  {
    let limit = max(1, min(limit, 10_000))
    return try catalog.read { db in
      // The state is written into the statement (one of three fixed words), not bound: only a
      // literal lets the planners use the partial index of pending or of dead deliveries.
      var sql = """
        SELECT d.subscription_id, d.state, d.attempts, d.next_attempt_at, d.last_error, d.delivered_at, e.*
        FROM event_deliveries d JOIN object_events e ON e.seq = d.event_seq WHERE d.state = '\(state.rawValue)'
        """
      var arguments: [any SQLBindable] = []
      if let subscription {
        sql += " AND d.subscription_id = ?"
        arguments.append(subscription)
      }
      sql += " ORDER BY d.event_seq, d.subscription_id LIMIT ?"
      arguments.append(limit)
      var deliveries = try db.rows(sql, arguments).map(Self.delivery(row:))
      guard state == .pending else { return deliveries }
      let unsent = try db.rows(
        Self.headSQL(
          db.dialect, columns: """
            s.id AS subscription_id, 'pending' AS state, 0 AS attempts, e.created_at AS next_attempt_at,
            NULL AS last_error, NULL AS delivered_at, e.*
            """, subscription: subscription != nil) + " ORDER BY e.seq, s.id LIMIT ?",
        (subscription.map { [$0] } ?? []) + [limit])
      deliveries += try unsent.map(Self.delivery(row:))
      deliveries.sort { ($0.event.sequence, $0.subscriptionID) < ($1.event.sequence, $1.subscriptionID) }
      return Array(deliveries.prefix(limit))
    }
  }

  static func delivery(row: Row) throws -> EventDelivery {
    EventDelivery(
      subscriptionID: row.string("subscription_id") ?? "", event: try event(row: row),
      state: EventDelivery.State(rawValue: row.string("state") ?? "") ?? .pending,
      attempts: Int(row.int("attempts") ?? 0), nextAttemptAt: row.date("next_attempt_at") ?? Date(timeIntervalSince1970: 0),
      lastError: row.string("last_error"), deliveredAt: row.date("delivered_at"))
  }

  static func event(row: Row) throws -> ObjectEvent {
    let object = try StoredObject.fromOutboxJSON(row.string("object") ?? "")
    let sequence = row.int("seq") ?? 0
    return ObjectEvent(
      sequence: sequence, id: row.string("id") ?? "",
      kind: ObjectChangeKind(rawValue: row.string("kind") ?? "") ?? .finalized, object: object,
      time: row.date("created_at") ?? Date(timeIntervalSince1970: 0), timeDeleted: row.date("time_deleted"),
      cursor: ObjectEventCursor(row: row))
  }

  /// Sends the event `eventID` again (same id) to every subscription that had it, or to
  /// `subscription` (which then gets it even if it did not match); returns how many deliveries
  /// were made pending.
  /// - Throws: ``LarderError/eventNotFound(_:)`` for an event (or subscription) the store does not have.
  @discardableResult
  public func replay(eventID: String, subscription: String? = nil) throws -> Int {
    try catalog.write { db in
      guard let row = try db.row("SELECT seq, bucket, name FROM object_events WHERE id = ?", [eventID]) else {
        throw LarderError.eventNotFound("no event '\(eventID.prefix(80))' in the outbox (delivered events are kept 7 days by default)")
      }
      return try Self.replay(
        db: db, where: "e.seq = ?", [row.int("seq") ?? 0], subscription: subscription)
    }
  }

  /// Sends again every event committed at or after `since` to the subscriptions that had them
  /// (or to `subscription`); returns how many deliveries were made pending.
  /// - Throws: ``LarderError/eventNotFound(_:)`` for an unknown subscription.
  @discardableResult
  public func replay(since: Date, subscription: String? = nil) throws -> Int {
    try catalog.write { db in try Self.replay(db: db, where: "e.created_at >= ?", [since], subscription: subscription) }
  }

  private static func replay(
    db: Database, where condition: String, _ arguments: [any SQLBindable], subscription: String?
  ) throws -> Int {
    let now = "\(db.dialect.nowMilliseconds)"
    if let subscription {
      guard try db.row("SELECT 1 AS one FROM event_subscriptions WHERE id = ?", [subscription]) != nil else {
        throw LarderError.eventNotFound("no subscription '\(subscription.prefix(80))'")
      }
      try db.execute(
        """
        INSERT INTO event_deliveries(subscription_id, event_seq, bucket, name, state, attempts, next_attempt_at)
        SELECT ?, e.seq, e.bucket, e.name, 'pending', 0, \(now) FROM object_events e WHERE \(condition)
        ON CONFLICT(subscription_id, event_seq) DO UPDATE SET state = 'pending', attempts = 0,
          next_attempt_at = excluded.next_attempt_at, lease_owner = NULL, lease_until = NULL, last_error = NULL,
          delivered_at = NULL
        """, [subscription] + arguments)
      return db.changes
    }
    // The deliveries it has rows of, through the primary key one subscription at a time (every
    // delivery's subscription exists: deleting one deletes its deliveries)…
    try db.execute(
      """
      UPDATE event_deliveries SET state = 'pending', attempts = 0, next_attempt_at = \(now), lease_owner = NULL,
        lease_until = NULL, last_error = NULL, delivered_at = NULL
      WHERE subscription_id IN (SELECT id FROM event_subscriptions)
        AND event_seq IN (SELECT e.seq FROM object_events e WHERE \(condition))
      """, arguments)
    let updated = db.changes
    // …and rows for the rest of each matching subscription's events since it was made (sent at
    // their first attempt, they have none; one past the head is then sent from its row, once).
    try db.execute(
      """
      INSERT INTO event_deliveries(subscription_id, event_seq, bucket, name, state, attempts, next_attempt_at)
      SELECT s.id, e.seq, e.bucket, e.name, 'pending', 0, \(now) FROM object_events e CROSS JOIN event_subscriptions s
      WHERE \(condition) AND \(matching) AND s.created_at <= e.created_at
      ON CONFLICT(subscription_id, event_seq) DO NOTHING
      """, arguments)
    return updated + db.changes
  }

  /// How many events each subscription has pending and dead, and when its oldest pending one committed.
  public func backlog() throws -> [EventSubscriptionBacklog] {
    try catalog.read { db in
      var out: [String: EventSubscriptionBacklog] = [:]
      for row in try db.rows("SELECT id FROM event_subscriptions ORDER BY created_at, id") {
        let id = row.string("id") ?? ""
        out[id] = EventSubscriptionBacklog(subscriptionID: id, pending: 0, oldestPending: nil, dead: 0)
      }
      // One query per state, each named literally so it reads that state's partial index; then
      // the events past each head.
      let unsent = Self.headSQL(
        db.dialect, columns: "s.id AS subscription_id, count(*) AS n, min(e.created_at) AS oldest", subscription: false)
      for (state, sql) in [("pending", Self.backlogSQL(state: "pending")), ("dead", Self.backlogSQL(state: "dead")),
        ("unsent", unsent + " GROUP BY s.id")]
      {
        for row in try db.rows(sql) {
          guard let id = row.string("subscription_id"), out[id] != nil else { continue }
          let n = Int(row.int("n") ?? 0)
          if state == "dead" {
            out[id]?.dead = n
          } else {
            out[id]?.pending += n
            if let oldest = row.date("oldest") {
              let known = out[id]?.oldestPending ?? oldest
              out[id]?.oldestPending = min(known, oldest)
            }
          }
        }
      }
      return out.values.sorted { $0.subscriptionID < $1.subscriptionID }
    }
  }

  /// Per subscription, how many deliveries are in `state` and the oldest one's commit time.
  package static func backlogSQL(state: String) -> String {
    """
    SELECT d.subscription_id, count(*) AS n, min(e.created_at) AS oldest
    FROM event_deliveries d JOIN object_events e ON e.seq = d.event_seq
    WHERE d.state = '\(state)' GROUP BY d.subscription_id
    """
  }

  /// Deletes the events committed before `?` that no subscription has a delivery of (per event,
  /// one primary-key lookup per subscription: `CROSS JOIN` keeps SQLite's planner from scanning
  /// the deliveries for each event instead) nor still has to send (past its head).
  package static func pruneEventsSQL(_ dialect: any SQLDialect) -> String {
    """
    DELETE FROM object_events WHERE created_at < ?
      AND NOT EXISTS (
        SELECT 1 FROM event_subscriptions s CROSS JOIN event_deliveries d
        WHERE d.subscription_id = s.id AND d.event_seq = object_events.seq)
      AND NOT EXISTS (SELECT 1 FROM event_subscriptions s WHERE \(afterHead(dialect, event: "object_events")))
    """
  }

  // MARK: Heads

  /// That event `e` comes after subscription `s`'s head in commit order. On SQLite (one writer:
  /// `tx_order` is always 0) the sequence alone, which the primary key serves; on PostgreSQL
  /// the pair, which `object_events_by_order` serves.
  package static func afterHead(_ dialect: any SQLDialect, event e: String = "e") -> String {
    dialect.settledTransactionOrder == nil
      ? "\(e).seq > s.head_seq" : "(\(e).tx_order, \(e).seq) > (s.head_order, s.head_seq)"
  }

  /// Where writers commit concurrently (PostgreSQL): the transaction order below which every
  /// transaction has finished, so no event can still commit there. Nil where commits are serial
  /// (SQLite: every committed event is settled).
  static func settledOrder(_ db: Database) throws -> Int64? {
    try db.dialect.settledTransactionOrder.map { try db.row($0)?.int("settled") ?? 0 }
  }

  /// The `ORDER BY` terms of commit order for `object_events e` (on SQLite `seq` alone, which
  /// the primary key serves).
  static func commitOrder(_ dialect: any SQLDialect) -> String {
    dialect.settledTransactionOrder == nil ? "e.seq" : "e.tx_order, e.seq"
  }

  /// That event `e` is one subscription `s` asked for (bucket, name prefix, kind).
  package static let matching = """
    e.bucket = s.bucket AND substr(e.name, 1, length(s.prefix)) = s.prefix AND s.kinds LIKE '%,' || e.kind || ',%'
    """

  /// `columns` of the events past the heads of the subscriptions (of one, `?`, when
  /// `subscription`) that they asked for and have no delivery row of yet: not sent yet.
  static func headSQL(_ dialect: any SQLDialect, columns: String, subscription: Bool) -> String {
    """
    SELECT \(columns) FROM event_subscriptions s JOIN object_events e ON \(afterHead(dialect))
    WHERE \(subscription ? "s.id = ? AND " : "")\(matching)
      AND NOT EXISTS (SELECT 1 FROM event_deliveries d WHERE d.subscription_id = s.id AND d.event_seq = e.seq)
    """
  }

  /// Where a subscription made now starts reading: after every event committed so far. On
  /// PostgreSQL, where transactions commit in any order, after the transactions known to have
  /// finished (the feed's settled horizon): an event of one still open is sent, and perhaps one
  /// committed just before the subscription too (at least once).
  static func endOfOutbox(_ db: Database) throws -> ObjectEventCursor {
    if let settled = try settledOrder(db) { return ObjectEventCursor(transactionOrder: settled - 1, sequence: .max) }
    return ObjectEventCursor(
      transactionOrder: 0, sequence: try db.row("SELECT coalesce(max(seq), 0) AS last FROM object_events")?.int("last") ?? 0)
  }

  /// Every event in this store's outbox in commit order, whether or not every transaction
  /// that began before it has finished (which `feed` waits for): for tests and tools that
  /// inspect what their own writes recorded, on a PostgreSQL cluster other clients keep busy.
  package func outbox() throws -> [ObjectEvent] {
    try catalog.read { db in try db.rows("SELECT * FROM object_events ORDER BY tx_order, seq").map(Self.event(row:)) }
  }

  // MARK: Feed

  /// Up to `limit` events after `cursor`, in commit order, and the cursor to ask with next
  /// (the same one when there is nothing new).
  ///
  /// Where writers commit concurrently (PostgreSQL) an event is answered only once every
  /// transaction that began before its own has finished, so a later answer never holds an
  /// event that sorts before the cursor; one committed but not settled yet is waited for, up
  /// to a second, so a reader sees its own writes.
  public func feed(after cursor: ObjectEventCursor, limit: Int = 100) throws -> (
    events: [ObjectEvent], next: ObjectEventCursor
  ) {
    let deadline = ContinuousClock.now + .seconds(1)
    while true {
      let (events, unsettled) = try catalog.read { db -> ([ObjectEvent], Bool) in
        let after = "(tx_order > ? OR (tx_order = ? AND seq > ?))"
        let position: [any SQLBindable] = [cursor.transactionOrder, cursor.transactionOrder, cursor.sequence]
        var sql = "SELECT * FROM object_events WHERE \(after)"
        var arguments = position
        let settled = try Self.settledOrder(db)
        if let settled {
          sql += " AND tx_order < ?"
          arguments.append(settled)
        }
        sql += " ORDER BY tx_order, seq LIMIT ?"
        arguments.append(max(1, min(limit, 1000)))
        let events = try db.rows(sql, arguments).map(Self.event(row:))
        guard let settled, events.count < limit else { return (events, false) }
        let waiting = try db.row(
          "SELECT 1 AS one FROM object_events WHERE \(after) AND tx_order >= ? LIMIT 1", position + [settled])
        return (events, waiting != nil)
      }
      if !unsettled || ContinuousClock.now >= deadline { return (events, events.last?.cursor ?? cursor) }
      Thread.sleep(forTimeInterval: 0.02)
    }
  }

  /// Removes delivered deliveries and events older than `retention` (default 7 days); events
  /// that some subscription still has pending or dead stay. Returns how many events went.
  @discardableResult
  public func prune(retention: Duration = .seconds(7 * 24 * 3600)) throws -> Int {
    let cutoff = Date.nowInMilliseconds.addingTimeInterval(-retention.timeInterval)
    return try catalog.write { db in
      try db.execute("DELETE FROM event_deliveries WHERE state = 'delivered' AND delivered_at < ?", [cutoff])
      try db.execute(Self.pruneEventsSQL(db.dialect), [cutoff])
      return db.changes
    }
  }
}
