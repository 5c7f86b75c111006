import Foundation
import Larder

/// Objects whose JSON is hard to get byte-exact: names and metadata with quotes, backslashes,
/// slashes, control characters, non-ASCII and astral characters; keys that sort differently by
/// bytes than by case or number; empty and absent optionals; extreme sizes; times with
/// fractions that do not survive a round trip through milliseconds, before 1970 and after 2038.
/// For tests that compare a hand-written JSON form with `JSONEncoder`'s, byte for byte.
package enum TrickyObjects {
  package static let all: [StoredObject] = [
    make(name: "plain.txt", metadata: [:], size: 0, crc32c: nil, time: 786_715_200),
    make(
      name: "a/b/c \"quoted\" \\ back/slash.txt", metadata: ["k": "v", "path": "/x/y"], size: 4096,
      crc32c: 0, time: 755_172_800.1229999, optionals: true),
    make(
      name: "ctl \u{01}\u{08}\u{09}\u{0A}\u{0C}\u{0D}\u{1F}\u{7F} end", metadata: ["\u{00}nul": "\u{1B}[0m"],
      size: Int64.max, crc32c: UInt32.max, time: -978_307_200.25),
    make(
      name: "ünïcödé/日本語/🦊 e\u{301}",
      metadata: ["é": "1", "e": "2", "B": "3", "a": "4", "10": "5", "9": "6", "Z": "🦊"],
      size: 1, crc32c: 123_456_789, time: 1_300_000_000.999, optionals: true, tokens: ["t1", "t2/x"]),
    make(
      name: "\u{2028}line\u{2029}sep </script>", metadata: ["": "", "quote\"key": "back\\value"],
      size: 5_000_000_000,
      crc32c: nil, time: 8_000_000_000.5, tokens: []),
  ]

  /// Times of the ``all`` objects' `updated`: one second on, as a later metadata change would be.
  static func make(
    name: String, metadata: [String: String], size: Int64, crc32c: UInt32?, time: Double,
    optionals: Bool = false,
    tokens: [String] = ["0f8fad5b-d9cb-469f-a165-70867728950e"]
  ) -> StoredObject {
    var file: [String: Any] = [
      "id": "file-\(size)", "sha256": String(repeating: "ab", count: 32), "size": size,
      "md5": size == 0 ? "" : "5d41402abc4b2a76b9719d911017c592", "contentType": "text/plain; charset=utf-8",
      "createdAt": time - 0.001,
    ]
    var object: [String: Any] = [
      "bucket": "app", "name": name, "generation": 1_733_480_000_123_456 + size % 7, "metageneration": 3,
      "contentType": "application/x-\"odd\"/type", "metadata": metadata, "downloadTokens": tokens,
      "timeCreated": time, "updated": time + 1,
    ]
    if let crc32c { file["crc32c"] = crc32c }
    if optionals {
      file["declaredContentType"] = "text/x-\u{1}declared"
      file["filename"] = "na/me \"x\".txt"
      object["cacheControl"] = "public, max-age=60"
      object["contentDisposition"] = "attachment; filename=\"a/b.txt\""
      object["contentEncoding"] = "gzip"
      object["contentLanguage"] = "fr"
    }
    object["file"] = file
    // Through the public Codable form, so the fixture needs no internal initialiser.
    let data = try! JSONSerialization.data(withJSONObject: object)
    return try! JSONDecoder().decode(StoredObject.self, from: data)
  }
}
