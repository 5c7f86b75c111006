import Foundation
import Larder
import LarderCrypto
import Testing

/// Rules that read `request.resource.md5Hash` on resumable uploads (tus and Firebase's
/// resumable protocol) of new content larger than `FileStore.inlineMD5Limit`, whose MD5 the
/// upload path leaves to the background hasher: the publish-time check must see the real MD5.
@Suite struct ResumableMD5RulesTests {
  /// New content (no blob row knows its MD5) just over the inline MD5 limit.
  static let large: [UInt8] = (0..<(Int(FileStore.inlineMD5Limit) + 4096)).map {
    UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 9)
  }
  static var largeMD5: String { Data(Digest.hash(.md5, large)).base64EncodedString() }

  /// Allows reading everything and creating only content whose MD5 is `md5`.
  static func rules(md5: String) -> String {
    """
    rules_version = '2';
    service firebase.storage {
      match /b/{bucket}/o {
        match /{name} {
          allow get: if true;
          allow create: if request.resource.md5Hash == '\(md5)';
        }
      }
    }
    """
  }

  func withMD5Rules<T>(md5: String, _ body: (LiveService) throws -> T) throws -> T {
    let rules = try temporaryRulesFile(Self.rules(md5: md5))
    defer { try? FileManager.default.removeItem(at: rules) }
    return try withRulesService(rules: rules, body)
  }

  @Test func tusUploadOfLargeNewContentIsJudgedOnItsRealMD5() throws {
    try withMD5Rules(md5: Self.largeMD5) { s in
      let upload = try s.create(length: Self.large.count, name: "big.bin")
      let last = try s.patch(upload, offset: 0, Self.large)
      #expect(last.status == 204, "\(last.text)")
      #expect(try s.snapshot("big.bin")?.bytes == Self.large)
      let meta = try s.send(.get("/v0/b/app/o/big.bin"))
      #expect(meta.json?["md5Hash"] as? String == Self.largeMD5)
    }
  }

  @Test func tusUploadOfLargeContentWithAnotherMD5IsRefusedAtTheLastByte() throws {
    let other = Data(Digest.hash(.md5, Array("other".utf8))).base64EncodedString()
    try withMD5Rules(md5: other) { s in
      let upload = try s.create(length: Self.large.count, name: "big.bin")
      let last = try s.patch(upload, offset: 0, Self.large)
      #expect(last.status == 403, "\(last.text)")
      #expect(last.error?["status"] as? String == "PERMISSION_DENIED")
      #expect(try s.send(.get("/v0/b/app/o/big.bin")).status == 404)
      #expect(try s.rowCounts()["objects"] == 0)
      #expect(try s.uploadRows() == 0)
    }
  }

  @Test func firebaseResumableUploadOfLargeNewContentIsJudgedOnItsRealMD5() throws {
    try withMD5Rules(md5: Self.largeMD5) { s in
      let url = try s.startSession("big.bin", length: Self.large.count)
      let r = try s.send(FirebaseWire.command(url, "upload, finalize", offset: 0, body: Self.large))
      #expect(r.status == 200, "\(r.text)")
      #expect(r["X-Goog-Upload-Status"] == "final")
      #expect(r.json?["md5Hash"] as? String == Self.largeMD5)
      #expect(try s.snapshot("big.bin")?.bytes == Self.large)
    }
  }
}
