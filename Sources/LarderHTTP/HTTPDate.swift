import Foundation
import LarderLogging

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), formatted and parsed without shared state.
public enum HTTPDate {
  public static func format(_ date: Date) -> String {
    let seconds = date.timeIntervalSince1970.rounded(.down)
    // Every download sends one (`Last-Modified`): computed here rather than through gmtime_r,
    // which takes glibc's time-zone lock, and strftime, which reads the locale.
    guard seconds.isFinite, abs(seconds) < 1e15 else { return formatWithLibc(date) }
    let civil = CivilTime(secondsSince1970: Int64(seconds))
    let (year, month, day, secondOfDay) = (civil.year, civil.month, civil.day, civil.secondOfDay)
    guard (1000...9999).contains(year) else { return formatWithLibc(date) }
    let weekday = Int(((civil.days % 7) + 11) % 7)  // 1970-01-01 was a Thursday (4)
    return String(unsafeUninitializedCapacity: 29) { out in
      var i = 0
      func put(_ byte: UInt8) {
        out[i] = byte
        i += 1
      }
      func two(_ n: Int) {
        put(0x30 + UInt8(n / 10))
        put(0x30 + UInt8(n % 10))
      }
      for b in dayNames[weekday].utf8 { put(b) }
      put(0x2C)
      put(0x20)
      two(day)
      put(0x20)
      for b in months[month - 1].utf8 { put(b) }
      put(0x20)
      two(year / 100)
      two(year % 100)
      put(0x20)
      two(secondOfDay / 3600)
      put(0x3A)
      two(secondOfDay / 60 % 60)
      put(0x3A)
      two(secondOfDay % 60)
      for b in " GMT".utf8 { put(b) }
      return i
    }
  }

  /// The libc formatting, for dates outside years 1000–9999 (never sent in practice).
  static func formatWithLibc(_ date: Date) -> String {
    var t = time_t(date.timeIntervalSince1970.rounded(.down))
    var tm = tm()
    gmtime_r(&t, &tm)
    var buffer = [CChar](repeating: 0, count: 64)
    let n = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &tm)
    return String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// Parses IMF-fixdate; nil for anything else (RFC 9110 lets a recipient ignore invalid dates).
  public static func parse(_ text: String) -> Date? {
    let parts = text.split(separator: " ")
    guard text.utf8.count == 29, parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), parts[5] == "GMT",
      let day = Int32(parts[1]), let month = months.firstIndex(of: String(parts[2])), let year = Int32(parts[3])
    else { return nil }
    let clock = parts[4].split(separator: ":")
    guard clock.count == 3, let h = Int32(clock[0]), let m = Int32(clock[1]), let s = Int32(clock[2]),
      (1...31).contains(day), (0...23).contains(h), (0...59).contains(m), (0...60).contains(s)
    else { return nil }
    var tm = tm()
    tm.tm_year = year - 1900
    tm.tm_mon = Int32(month)
    tm.tm_mday = day
    tm.tm_hour = h
    tm.tm_min = m
    tm.tm_sec = s
    return Date(timeIntervalSince1970: TimeInterval(timegm(&tm)))
  }

  private static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
  private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
}

/// A UTC date and time of day from seconds since 1970, for the formatters that run on every
/// request (`Last-Modified`, the access log's `time`): computed rather than through `gmtime_r`,
/// which takes glibc's time-zone lock.
struct CivilTime {
  /// Whole days since 1970-01-01 (negative before it).
  var days: Int64
  var year: Int
  /// 1–12.
  var month: Int
  /// 1–31.
  var day: Int
  var secondOfDay: Int

  init(secondsSince1970 t: Int64) {
    days = t >= 0 ? t / 86_400 : (t - 86_399) / 86_400
    secondOfDay = Int(t - days * 86_400)
    let civil = CivilDate.civil(days: days)
    (year, month, day) = (Int(civil.year), Int(civil.month), Int(civil.day))
  }
}
