/// A write refused by the caller's quota (``QuotaLedger``): answered 429 with `Retry-After`.
///
/// ```swift
/// throw QuotaError.bytes(limit: 10 << 30, period: .seconds(3600), retryAfter: 42)
/// ```
public enum QuotaError: Error, Sendable, Equatable {
  /// The write would take the identity past `limit` bytes per `period`; `retryAfter` seconds
  /// from now its bucket holds enough again.
  case bytes(limit: Int64, period: Duration, retryAfter: Int)
  /// The identity has `limit` resumable uploads in progress; in `retryAfter` seconds the first
  /// of them expires (finishing or cancelling one frees a slot at once).
  case uploadsInProgress(limit: Int, retryAfter: Int)

  public var code: String {
    switch self {
    case .bytes: "write-quota-exceeded"
    case .uploadsInProgress: "too-many-uploads-in-progress"
    }
  }

  /// Seconds until the refused write may succeed (`Retry-After`).
  public var retryAfter: Int {
    switch self {
    case .bytes(_, _, let seconds), .uploadsInProgress(_, let seconds): seconds
    }
  }

  public var message: String {
    switch self {
    case .bytes(let limit, let period, let seconds):
      "write quota exceeded: at most \(limit) bytes per \(period.components.seconds) s may be written by one identity; retry in \(seconds) s"
    case .uploadsInProgress(let limit, let seconds):
      "too many uploads in progress: at most \(limit) per identity; finish or cancel one, or retry in \(seconds) s when the oldest expires"
    }
  }
}
