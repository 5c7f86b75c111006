/// Proleptic Gregorian calendar arithmetic in UTC (Howard Hinnant's `days_from_civil` and
/// `civil_from_days`), so that timestamps (access logs, HTTP dates, the rules' `timestamp`)
/// depend neither on Foundation's calendar nor on the host's time zone, whose lookups take
/// glibc's time-zone lock. The one implementation: every module that writes or reads a date
/// calls this.
///
///     CivilDate.civil(days: 0)                         // (1970, 1, 1)
///     CivilDate.days(year: 2000, month: 3, day: 1)     // 11017
public enum CivilDate {
  /// Whole days since 1970-01-01 (negative before it) of a date; `month` 1–12.
  public static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let mp = (month + 9) % 12
    let dayOfYear = (153 * mp + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
  }

  /// The date of the day `days` after 1970-01-01; `month` 1–12, `day` 1–31.
  public static func civil(days: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
  }
}
