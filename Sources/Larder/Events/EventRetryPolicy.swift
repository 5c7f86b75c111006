/// When a failed delivery is tried again, and when it is given up (dead-lettered).
///
/// The delay doubles from `firstDelay` up to `maxDelay`; a delivery still failing `giveUpAfter`
/// after its event committed is dead: kept, listed by `larder events dead`, sent again only by
/// a replay.
public struct EventRetryPolicy: Sendable, Equatable {
  public var firstDelay: Duration
  public var maxDelay: Duration
  public var giveUpAfter: Duration

  public init(
    firstDelay: Duration = .seconds(10), maxDelay: Duration = .seconds(600), giveUpAfter: Duration = .seconds(24 * 3600)
  ) {
    self.firstDelay = firstDelay
    self.maxDelay = maxDelay
    self.giveUpAfter = giveUpAfter
  }

  /// The wait after the `attempts`-th failed attempt (1: the first).
  public func delay(afterAttempt attempts: Int) -> Duration {
    var delay = firstDelay
    for _ in 1..<max(1, attempts) {
      delay = delay * 2
      if delay >= maxDelay { return maxDelay }
    }
    return min(delay, maxDelay)
  }
}
