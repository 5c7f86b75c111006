import Foundation
import Testing

/// Malformed tus headers are refused with 400 and change nothing.
@Suite struct TusBadInputTests {
  static let malformedOffsets = ["-1", "+0", "0x0", "1.0", "99999999999999999999", "", "3\t1", "٣"]

  @Test func malformedUploadOffsetIsRefusedAndTheOffsetStays() throws {
    // Live: field values are trimmed by the server layer (the request head parser).
    let h = try TusHarness()
    let path = try h.create(length: 10)
    #expect(try h.patch(path, offset: 0, Array("abc".utf8)).status == 204)
    for offset in Self.malformedOffsets {
      let r = try h.request(
        "PATCH", path, headers: [TusHarness.tus, TusHarness.stream, ("Upload-Offset", offset)], body: Array("x".utf8))
      #expect(r.status == 400, "Upload-Offset \(offset.debugDescription): \(r.status) \(r.text)")
      let head = try h.head(path)
      #expect(head.status == 200)
      #expect(head["Upload-Offset"] == "3", "after \(offset.debugDescription)")
    }
    // Leading whitespace is not part of a field value (RFC 9110 §5.5): " 0" is the offset 0, a
    // conflict with the upload's 3, not a malformed header.
    let spaced = try h.request(
      "PATCH", path, headers: [TusHarness.tus, TusHarness.stream, ("Upload-Offset", " 0")], body: Array("x".utf8))
    #expect(spaced.status == 409, "\(spaced.text)")
    #expect(try h.head(path)["Upload-Offset"] == "3")
    // Nor is trailing whitespace: "3 \t" is the offset 3.
    let trailing = try h.request(
      "PATCH", path, headers: [TusHarness.tus, TusHarness.stream, ("Upload-Offset", "3 \t")], body: Array("d".utf8))
    #expect(trailing.status == 204, "\(trailing.text)")
    #expect(trailing["Upload-Offset"] == "4")
    // The upload still accepts the right offset and completes with the right bytes.
    #expect(try h.patch(path, offset: 4, Array("efghij".utf8)).status == 204)
    #expect(try h.objectBytes("file.bin").text == "abcdefghij")
  }

  @Test func malformedUploadConcatIsRefused() throws {
    let h = try InProcessService()
    let named = ("Upload-Metadata", TusHarness.metadata([("name", "joined.bin")]))
    for concat in ["final;", "bogus", "final", "partial;x", "final; "] {
      let r = try h.request("POST", "/v0/b/app/uploads", headers: [TusHarness.tus, ("Upload-Concat", concat), named])
      #expect(r.status == 400, "Upload-Concat \(concat.debugDescription): \(r.status) \(r.text)")
    }
    // A finished partial in another bucket cannot be named by a final upload in this one.
    let other = try h.request(
      "POST", "/v0/b/other/uploads", headers: [TusHarness.tus, ("Upload-Length", "2"), ("Upload-Concat", "partial")])
    #expect(other.status == 201)
    let otherPath = try #require(other["Location"])
    #expect(try h.patch(otherPath, offset: 0, Array("hi".utf8)).status == 204)
    let crossing = try h.request(
      "POST", "/v0/b/app/uploads", headers: [TusHarness.tus, ("Upload-Concat", "final;\(otherPath)"), named])
    #expect(crossing.status == 400, "\(crossing.status) \(crossing.text)")
    #expect(try h.objectBytes("joined.bin").status == 404)
  }
}
