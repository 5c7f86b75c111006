import Foundation

/// Writes object-change events into the catalog's outbox, inside the transaction of the change.
///
/// Called only by ``ObjectStore``'s `insert`, `update` and `delete`, which every path that
/// changes an object row goes through (uploads of every protocol, copy, compose, patch, delete,
/// the CLI, the Swift API): the event commits exactly when the change does, and a change that
/// rolls back leaves none. The same statement fans the event out to one delivery row per
/// matching subscription, so a subscription sees every change committed after it was made.
/// On PostgreSQL the commit is announced (`NOTIFY`) so deliverers on every node wake at once.
enum ObjectChangeOutbox {
  /// The `NOTIFY` payload on the store's channel that says events were committed (it can be no
  /// model type's name).
  static let announcement = "#object-events"

  /// Records `kind` for `object` (as the change leaves it; as it was, for a delete).
  static func record(
    _ kind: ObjectChangeKind, object: StoredObject, time: Date, timeDeleted: Date? = nil, db: Database
  ) throws {
    let body = String(decoding: try object.outboxJSON(), as: UTF8.self)
    let id = UUID().uuidString.lowercased()
    guard
      let seq = try db.row(
        """
        INSERT INTO object_events(id, kind, bucket, name, object, time_deleted, created_at, tx_order)
        VALUES (?, ?, ?, ?, ?, ?, ?, \(db.dialect.transactionOrder)) RETURNING seq
        """, [id, kind.rawValue, object.bucket, object.name, body, timeDeleted, time]
      )?.int("seq")
    else { throw LarderError.invalidArgument("the catalog did not number the event") }
    try db.execute(
      """
      INSERT INTO event_deliveries(subscription_id, event_seq, bucket, name, state, attempts, next_attempt_at)
      SELECT id, ?, bucket, ?, 'pending', 0, ? FROM event_subscriptions
      WHERE bucket = ? AND substr(CAST(? AS TEXT), 1, length(prefix)) = prefix AND kinds LIKE ?
      """, [seq, object.name, time, object.bucket, object.name, "%,\(kind.rawValue),%"])
    if let announcing = db as? any CommitAnnouncingDatabase {
      try announcing.announce(modelTypes: [announcement])
    }
  }
}
