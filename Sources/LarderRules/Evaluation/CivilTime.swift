import Foundation
import LarderLogging

/// The rules' timestamps in UTC: the calendar is ``CivilDate``'s (shared with the HTTP layer's
/// dates), the split of an instant into days and nanoseconds is the rules' own.
enum CivilTime {
  static func days(year: Int64, month: Int64, day: Int64) -> Int64 { CivilDate.days(year: year, month: month, day: day) }

  static func civil(days: Int64) -> (year: Int64, month: Int64, day: Int64) { CivilDate.civil(days: days) }

  /// Whole days since 1970-01-01 and the nanoseconds into that day.
  static func split(_ date: Date) -> (days: Int64, nanosOfDay: Int64) {
    let seconds = date.timeIntervalSince1970
    let days = Int64((seconds / 86_400).rounded(.down))
    let nanos = Int64(((seconds - Double(days) * 86_400) * 1e9).rounded(.down))
    return (days, min(max(nanos, 0), 86_400_000_000_000 - 1))
  }
}
