import Foundation

extension Duration {
  /// The duration in seconds, as `Date` arithmetic wants it.
  package var timeInterval: TimeInterval {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
