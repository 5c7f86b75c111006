import Foundation

/// One event's delivery to one subscription: pending (not acknowledged yet, perhaps waiting
/// for a retry), delivered (acknowledged with a 2xx) or dead (given up; kept and visible).
public struct EventDelivery: Sendable, Equatable {
  public enum State: String, Sendable, Codable {
    case pending, delivered, dead
  }

  public var subscriptionID: String
  public var event: ObjectEvent
  public var state: State
  /// Attempts made so far (a pending delivery with attempts is being retried).
  public var attempts: Int
  public var nextAttemptAt: Date
  /// The last failure: an HTTP status or what went wrong below HTTP.
  public var lastError: String?
  public var deliveredAt: Date?
  /// Handed out from the subscription's head (its first attempt): it has no row; a 2xx is
  /// recorded by moving the head past it, a failure by writing its row.
  package var fromHead = false

  /// The object it is about: deliveries of one object go out one at a time, in order.
  package var objectKey: String { event.object.bucket + "\u{0}" + event.object.name }
}

/// A subscription's backlog, for `/metrics` and the console.
public struct EventSubscriptionBacklog: Sendable, Equatable {
  public var subscriptionID: String
  public var pending: Int
  /// When the oldest pending event committed (nil: none pending): the lag is now minus this.
  public var oldestPending: Date?
  public var dead: Int

  /// Seconds the oldest pending event has waited at `now` (0: none pending).
  public func lagSeconds(at now: Date = Date()) -> Double {
    oldestPending.map { max(0, now.timeIntervalSince($0)) } ?? 0
  }
}
