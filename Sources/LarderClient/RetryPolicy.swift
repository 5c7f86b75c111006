/// How a resumable upload retries a failed `PATCH`: bounded attempts with exponential backoff.
///
/// After a failure the client waits, asks the server for the upload's offset (`HEAD`) and
/// continues from there. `maxAttempts` counts consecutive failures; any progress resets it.
public struct RetryPolicy: Sendable, Equatable {
  public var maxAttempts: Int
  public var initialDelay: Duration
  public var maxDelay: Duration

  public init(maxAttempts: Int = 5, initialDelay: Duration = .milliseconds(250), maxDelay: Duration = .seconds(8)) {
    self.maxAttempts = max(1, maxAttempts)
    self.initialDelay = initialDelay
    self.maxDelay = maxDelay
  }

  public static let `default` = RetryPolicy()

  /// The wait before retry number `attempt` (1-based): `initialDelay * 2^(attempt-1)`, capped.
  func delay(beforeAttempt attempt: Int) -> Duration {
    var d = initialDelay
    for _ in 1..<max(1, attempt) where d < maxDelay { d = d * 2 }
    return min(d, maxDelay)
  }
}
