import Foundation
import Synchronization

/// How long this process's catalog writes waited for their locks and held them, as two
/// histograms over the same bounds (rendered in `/metrics`).
///
/// *Held* is from the moment the write's locks were granted (its `BEGIN` and lock statements
/// returned) to the moment its `COMMIT` returned, so it includes the commit's own flush: it is
/// the time during which another write of the same key (or any write, for an unkeyed one)
/// cannot start. *Waited* is from asking for a connection to the locks being granted.
/// ```swift
/// let times = larder.catalogLockTimes()
/// print(times.held.count, times.held.sum / Double(times.held.count))
/// ```
public struct CatalogLockTimes: Sendable, Equatable {
  /// Upper bounds of the buckets, in seconds (the last bucket, +Inf, is implicit).
  public static let bounds: [Double] = [
    0.000_05, 0.000_1, 0.000_2, 0.000_3, 0.000_5, 0.000_75, 0.001, 0.001_5, 0.002, 0.003, 0.005, 0.007_5,
    0.01,
    0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1, 2, 5,
  ]

  /// One histogram: counts per bucket (not cumulative; one more than ``bounds``, the last is
  /// +Inf), their sum and their number.
  public struct Histogram: Sendable, Equatable {
    public var counts = [UInt64](repeating: 0, count: CatalogLockTimes.bounds.count + 1)
    public var sum: Double = 0
    public var count: UInt64 = 0

    mutating func record(_ seconds: Double) {
      let bucket = CatalogLockTimes.bounds.firstIndex { seconds <= $0 } ?? CatalogLockTimes.bounds.count
      counts[bucket] += 1
      sum += seconds
      count += 1
    }
  }

  /// Keyed writes (``WriteKey``): they hold the store's lock shared.
  public var keyedHeld = Histogram()
  /// Unkeyed writes: they hold the store's lock alone.
  public var exclusiveHeld = Histogram()
  /// Every write's wait, keyed or not.
  public var waited = Histogram()
}

/// The process's record of ``CatalogLockTimes``; one per ``Catalog``.
final class CatalogLockClock: Sendable {
  private let times = Mutex(CatalogLockTimes())

  var snapshot: CatalogLockTimes { times.withLock { $0 } }

  func record(keyed: Bool, waited: Duration, held: Duration) {
    times.withLock { t in
      t.waited.record(waited.timeInterval)
      if keyed { t.keyedHeld.record(held.timeInterval) } else { t.exclusiveHeld.record(held.timeInterval) }
    }
  }
}
