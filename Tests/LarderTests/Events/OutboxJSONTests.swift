import Foundation
import Larder
import LarderTestSupport
import Testing

/// The outbox's stored object and the JSON pieces under it are written and read without
/// Codable, and stay exactly what `JSONEncoder` wrote before, so rows of older builds (and of
/// other nodes on one PostgreSQL catalog) read the same and receivers see the same bytes.
@Suite struct OutboxJSONTests {
  static func encoded(_ object: StoredObject) throws -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    return Array(try encoder.encode(object))
  }

  @Test(arguments: TrickyObjects.all)
  func theStoredFormIsWhatJSONEncoderWrites(_ object: StoredObject) throws {
    let written = try object.outboxJSON()
    let expected = try Self.encoded(object)
    #expect(
      written == expected,
      "\(String(decoding: written, as: UTF8.self))\n!=\n\(String(decoding: expected, as: UTF8.self))")
  }

  @Test(arguments: TrickyObjects.all)
  func theStoredFormReadsBackWithoutJSONDecoder(_ object: StoredObject) throws {
    var text = String(decoding: try object.outboxJSON(), as: UTF8.self)
    let read = try #require(text.withUTF8 { StoredObject(outboxJSON: $0) })
    #expect(read == object)
    #expect(
      read.timeCreated.timeIntervalSinceReferenceDate == object.timeCreated.timeIntervalSinceReferenceDate)
    #expect(try StoredObject.fromOutboxJSON(text) == object)
  }

  /// A row as an older build wrote it (`JSONEncoder`, `.sortedKeys`: slashes escaped), and the
  /// same object in other hands' JSON: spaces, another key order, `\u` escapes (a surrogate
  /// pair), `null` optionals, a key this build does not know. Each reads as `JSONDecoder`
  /// reads it, by the fast reader.
  @Test func rowsOfThePreviousBuildAndOtherWritersRead() throws {
    let previousBuild = #"""
      {"bucket":"app","contentType":"text\/plain","downloadTokens":["4bd2a4e0-2a4c-4f4c-9d52-1a1f0c6f1d2e"],"file":{"contentType":"text\/plain","crc32c":3421780262,"createdAt":786715200.1229999,"id":"F1","md5":"5d41402abc4b2a76b9719d911017c592","sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","size":5},"generation":1765015200122000,"metadata":{"k":"vé \"q\""},"metageneration":1,"name":"a\/b c.txt","timeCreated":786715200.1229999,"updated":786715200.1229999}
      """#
    let otherWriter = #"""
      { "name" : "a/b c.txt", "bucket": "app", "generation": 1765015200122000, "metageneration": 1,
        "contentType": "text/plain", "metadata": { "k": "v\u00E9 \"q\"" }, "downloadTokens": [ "4bd2a4e0-2a4c-4f4c-9d52-1a1f0c6f1d2e" ],
        "cacheControl": null, "contentLanguage": null, "retired": {"x": [1, 2.5e3, true, false, null, "s"]},
        "file": { "size": 5, "id": "F1", "crc32c": 3421780262, "sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
          "md5": "5d41402abc4b2a76b9719d911017c592", "contentType": "text/plain", "filename": null, "createdAt": 786715200.1229999 },
        "timeCreated": 786715200.1229999, "updated": 786715200.1229999 }
      """#
    for var text in [previousBuild, otherWriter] {
      let decoded = try JSONDecoder().decode(StoredObject.self, from: Data(text.utf8))
      let read = try #require(text.withUTF8 { StoredObject(outboxJSON: $0) })
      #expect(read == decoded)
      #expect(read.name == "a/b c.txt")
      #expect(read.metadata == ["k": "v\u{e9} \"q\""])
      #expect(read.file.crc32c == 3_421_780_262)
      #expect(read.file.filename == nil && read.cacheControl == nil)
      #expect(read.timeCreated == Date(timeIntervalSinceReferenceDate: 786_715_200.1229999))
    }
    // What the previous build wrote is what this one writes.
    let object = try StoredObject.fromOutboxJSON(previousBuild)
    #expect(String(decoding: try object.outboxJSON(), as: UTF8.self) == previousBuild)
    var astral = #"{"x":"\ud83e\udd8a"}"#
    #expect(
      astral.withUTF8 { utf8 -> String? in
        var json = JSONReader(utf8)
        var value: String?
        guard json.members({ _, json in JSONReader.keep(json.string(), in: &value) }) else { return nil }
        return value
      } == "🦊")
  }

  @Test func textThatIsNotAStoredObjectIsRefusedAsJSONDecoderRefusesIt() throws {
    for text in ["", "{", "[]", #"{"bucket":"app"}"#, #"{"bucket":1}"#, #"{"x":"\ud83e"}"#] {
      #expect(throws: DecodingError.self) { try StoredObject.fromOutboxJSON(text) }
    }
  }

  /// Resources and events carry their times as Foundation's ISO 8601 style writes them
  /// (milliseconds truncated from the seconds since 2001), now without the formatter.
  @Test func timestampsAreWhatTheISO8601FormatStyleWrites() {
    let style = Date.ISO8601FormatStyle(
      includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!)
    var generator = SystemRandomNumberGenerator()
    var dates = [-978_307_200.0, -978_307_200.25, 0, 755_172_800.1229999, 252_423_993_599.999, 1e-9, -1e-9]
      .map(Date.init(timeIntervalSinceReferenceDate:))
    for _ in 0..<5000 {
      let milliseconds = Int64.random(in: 0..<253_402_300_800_000, using: &generator)
      dates.append(Date(timeIntervalSince1970: Double(milliseconds) / 1000))
      dates.append(Date(timeIntervalSinceReferenceDate: .random(in: -978_307_200..<1e10, using: &generator)))
    }
    let differing = dates.filter { StoredObject.timestamp($0) != $0.formatted(style) }
    #expect(
      differing.isEmpty,
      "\(differing.prefix(3).map { ($0.timeIntervalSinceReferenceDate, $0.formatted(style)) })")
    // Outside 1970–9999 Foundation writes them; inside, none needs it.
    #expect(dates.filter { $0.timeIntervalSince1970 >= 0 && $0.millisecondTimestamp == nil }.isEmpty)
    #expect(Date(timeIntervalSince1970: -1).millisecondTimestamp == nil)
    #expect(Date(timeIntervalSince1970: 253_402_300_800).millisecondTimestamp == nil)
    #expect(StoredObject.timestamp(Date(timeIntervalSince1970: -1.5)) == "1969-12-31T23:59:58.500Z")
  }
}
