import Foundation

/// Proleptic Gregorian calendar arithmetic in UTC (Howard Hinnant's algorithms), so
/// timestamps do not depend on Foundation's calendar or the host time zone.
enum CivilTime {
  static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let mp = (month + 9) % 12
    let doy = (153 * mp + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
  }

  static func civil(days z0: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let z = z0 + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let day = doy - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
  }

  /// Whole days since 1970-01-01 and the nanoseconds into that day.
  static func split(_ date: Date) -> (days: Int64, nanosOfDay: Int64) {
    let seconds = date.timeIntervalSince1970
    let days = Int64((seconds / 86_400).rounded(.down))
    let nanos = Int64(((seconds - Double(days) * 86_400) * 1e9).rounded(.down))
    return (days, min(max(nanos, 0), 86_400_000_000_000 - 1))
  }
}
