import Foundation

/// One change of one object, as the outbox recorded it in the change's own transaction.
///
/// `id` is fixed when the change commits and is the same on every delivery of it; `object` is
/// the object as the change left it (for `deleted`, as it was before).
public struct ObjectEvent: Sendable, Equatable {
  /// The outbox's sequence number: per object, later changes have larger ones.
  public var sequence: Int64
  public var id: String
  public var kind: ObjectChangeKind
  public var object: StoredObject
  /// When the change committed.
  public var time: Date
  /// For `deleted`: when the generation stopped being live.
  public var timeDeleted: Date?
  /// Where a feed reader resumes to read what follows this event.
  public var cursor: ObjectEventCursor
}

/// A position in the event feed, in commit order; ``ObjectEventCursor/start`` is before everything.
///
/// Its text form (`description`, ``init(_:)``) is what `GET /admin/v1/events?after=` takes.
public struct ObjectEventCursor: Sendable, Hashable, CustomStringConvertible {
  /// The writing transaction's place in commit order (0 on SQLite, whose writes are serial).
  var transactionOrder: Int64
  var sequence: Int64

  public static let start = ObjectEventCursor(transactionOrder: 0, sequence: 0)

  init(transactionOrder: Int64, sequence: Int64) {
    self.transactionOrder = transactionOrder
    self.sequence = sequence
  }

  /// Parses a cursor's text (`"0"` or empty is the start).
  /// - Throws: ``LarderError/invalidArgument(_:)``.
  public init(_ text: String) throws(LarderError) {
    if text.isEmpty || text == "0" {
      self = .start
      return
    }
    let parts = text.split(separator: "-", omittingEmptySubsequences: false)
    guard parts.count == 2, let order = Int64(parts[0]), let sequence = Int64(parts[1]), order >= 0, sequence >= 0
    else { throw .invalidArgument("'\(text.prefix(40))' is not an event cursor") }
    self.init(transactionOrder: order, sequence: sequence)
  }

  public var description: String { "\(transactionOrder)-\(sequence)" }

  /// The position of the `object_events` row `row` (its `tx_order` and `seq`).
  init(row: Row) {
    self.init(transactionOrder: row.int("tx_order") ?? 0, sequence: row.int("seq") ?? 0)
  }
}
