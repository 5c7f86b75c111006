import Foundation
import LarderLogging

extension Date {
  /// This date as `Date.ISO8601FormatStyle(includingFractionalSeconds: true)` in UTC writes it
  /// (`2026-12-06T10:13:20.122Z`), without its formatter, for the years 1970–9999; nil
  /// outside them. Byte for byte the same: milliseconds truncated from the seconds since 2001
  /// (the value a `Date` holds), so `1733480000.123` since 1970 reads `.122`, as Foundation
  /// writes it. Every object resource and event carries three of these.
  package var millisecondTimestamp: String? {
    let reference = timeIntervalSinceReferenceDate
    guard reference.isFinite else { return nil }
    let whole = reference.rounded(.down)
    guard whole > -978_307_201, whole < 253_402_300_800 - 978_307_200 else { return nil }
    let millis = Int((reference - whole) * 1000)
    let seconds = Int64(whole) + 978_307_200
    let (year, month, day) = CivilDate.civil(days: seconds / 86_400)
    let secondOfDay = Int(seconds % 86_400)
    return String(unsafeUninitializedCapacity: 24) { out in
      func two(_ value: Int, at i: Int) {
        out[i] = UInt8(0x30 + value / 10)
        out[i + 1] = UInt8(0x30 + value % 10)
      }
      two(Int(year) / 100, at: 0)
      two(Int(year) % 100, at: 2)
      out[4] = 0x2D
      two(Int(month), at: 5)
      out[7] = 0x2D
      two(Int(day), at: 8)
      out[10] = 0x54
      two(secondOfDay / 3600, at: 11)
      out[13] = 0x3A
      two(secondOfDay / 60 % 60, at: 14)
      out[16] = 0x3A
      two(secondOfDay % 60, at: 17)
      out[19] = 0x2E
      out[20] = UInt8(0x30 + millis / 100)
      two(millis % 100, at: 21)
      out[23] = 0x5A
      return 24
    }
  }
}
