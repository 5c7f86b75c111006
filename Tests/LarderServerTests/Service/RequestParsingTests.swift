import Foundation
import LarderLogging
import Testing

@testable import LarderServer

/// The one parser of every count a protocol sends, and the one calendar of every date.
@Suite struct DecimalCountTests {
  @Test func aCountIsDigitsOnlyWithin64Bits() {
    #expect(DecimalCount.parse("0") == 0)
    #expect(DecimalCount.parse("007") == 7)
    #expect(DecimalCount.parse("9223372036854775807") == Int64.max)
    for bad in [
      "", "+1", "-1", "1e3", " 1", "1 ", "0x10", "9223372036854775808", "99999999999999999999", "١",
    ] {
      #expect(DecimalCount.parse(bad) == nil, "\(bad)")
    }
    #expect(DecimalCount.parse(header: " 42 ") == 42)
    #expect(DecimalCount.parse(header: "4 2") == nil)
  }

  @Test func aBadCountInAnyProtocolIsA400NamingIt() throws {
    try withInProcessService { s in
      let firebase = try s.send(.get("/v0/b/app/o?maxResults=1e3"))
      #expect(firebase.status == 400)
      #expect(firebase.error?["message"] as? String == "maxResults must be a non-negative integer, got '1e3'")
      let gcs = try s.send(
        .init("POST", "/upload/storage/v1/b/app/o?uploadType=media&name=a&ifGenerationMatch=-1"))
      #expect(gcs.status == 400)
      #expect(gcs.text.contains("ifGenerationMatch must be a non-negative integer, got '-1'"), "\(gcs.text)")
      let tus = try s.send(
        .init(
          "POST", "/v0/b/app/uploads",
          headers: [("Tus-Resumable", "1.0.0"), ("Upload-Length", "+5"), ("Upload-Metadata", "name YQ==")]))
      #expect(tus.status == 400)
      #expect(tus.text.contains("Upload-Length must be a non-negative integer"), "\(tus.text)")
      // Nothing was stored by any of them.
      #expect(try s.service.larder.objects.find(bucket: "app", name: "a") == nil)
    }
  }
}

@Suite struct CivilDateTests {
  @Test func daysAndDatesAgreeWithFoundationsGregorianCalendar() throws {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
    #expect(CivilDate.days(year: 2000, month: 3, day: 1) == 11_017)
    for days in stride(from: Int64(-800_000), through: 3_000_000, by: 997) {
      let (year, month, day) = CivilDate.civil(days: days)
      #expect(CivilDate.days(year: year, month: month, day: day) == days)
      let parts = calendar.dateComponents(
        [.year, .month, .day], from: Date(timeIntervalSince1970: TimeInterval(days) * 86_400))
      // Foundation's Gregorian calendar is Julian before 1582-10-15; compare after it.
      if year >= 1583 { #expect((parts.year, parts.month, parts.day) == (Int(year), Int(month), Int(day))) }
    }
  }
}
