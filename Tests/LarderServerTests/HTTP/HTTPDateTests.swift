import Foundation
import LarderHTTP
import Testing

/// `HTTPDate.format` computes the calendar itself (no gmtime_r, no strftime): it must agree
/// with an independent formatter on every kind of date.
@Suite struct HTTPDateTests {
  static func reference(_ date: Date) -> String {
    let f = DateFormatter()
    f.locale = Locale(identifier: "en_US_POSIX")
    f.timeZone = TimeZone(identifier: "GMT")
    f.calendar = Calendar(identifier: .gregorian)
    f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return f.string(from: date)
  }

  @Test func formatsKnownDates() {
    #expect(HTTPDate.format(Date(timeIntervalSince1970: 784_111_777)) == "Sun, 06 Nov 1994 08:49:37 GMT")
    #expect(HTTPDate.format(Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
    #expect(HTTPDate.format(Date(timeIntervalSince1970: 951_782_400)) == "Tue, 29 Feb 2000 00:00:00 GMT")
    #expect(HTTPDate.format(Date(timeIntervalSince1970: -1)) == "Wed, 31 Dec 1969 23:59:59 GMT")
    #expect(HTTPDate.format(Date(timeIntervalSince1970: 1_764_525_599.999)) == "Sun, 30 Nov 2025 17:59:59 GMT")
    #expect(HTTPDate.format(Date(timeIntervalSince1970: 253_402_300_799)) == "Fri, 31 Dec 9999 23:59:59 GMT")
  }

  @Test func agreesWithAnIndependentFormatterAcrossCenturies() {
    // From 1601 to 2400: leap centuries, month ends, and seconds either side of midnight.
    var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
    for _ in 0..<5000 {
      seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      let seconds = -11_644_473_600 + Int64(seed >> 20) % 25_246_000_000
      let date = Date(timeIntervalSince1970: TimeInterval(seconds))
      #expect(HTTPDate.format(date) == Self.reference(date), "\(seconds)")
      #expect(HTTPDate.parse(HTTPDate.format(date)) == date)
    }
  }
}
