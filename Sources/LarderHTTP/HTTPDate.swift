import Foundation

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), formatted and parsed without shared state.
public enum HTTPDate {
  public static func format(_ date: Date) -> String {
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

  private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
}
