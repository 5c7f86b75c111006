import Foundation

/// Writes object-change events into the catalog's outbox, inside the transaction of the change.
///
/// Called only by ``ObjectStore``'s `insert`, `update` and `delete`, which every path that
/// changes an object row goes through (uploads of every protocol, copy, compose, patch, delete,
/// the CLI, the Swift API): the event commits exactly when the change does, and a change that
/// rolls back leaves none. Nothing is written per subscription: each reads the outbox from its
/// head (``EventDeliveryQueue``), so a change costs one row whatever the number of subscriptions.
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
      try db.row(
        """
        INSERT INTO object_events(id, kind, bucket, name, object, time_deleted, created_at, tx_order)
        VALUES (?, ?, ?, ?, ?, ?, ?, \(db.dialect.transactionOrder)) RETURNING seq
        """, [id, kind.rawValue, object.bucket, object.name, body, timeDeleted, time]
      )?.int("seq") != nil
    else { throw LarderError.invalidArgument("the catalog did not number the event") }
    if let announcing = db as? any CommitAnnouncingDatabase {
      try announcing.announce(modelTypes: [announcement])
    }
  }
}
