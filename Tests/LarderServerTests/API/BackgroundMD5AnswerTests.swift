import Foundation
import Larder
import LarderCrypto
import Testing

/// `md5Hash` in answers now that MD5 is off the upload path: in the answer for content up to
/// `FileStore.inlineMD5Limit` (or when the client gave one) and in Firebase upload answers,
/// absent otherwise for larger content until the background hasher has it, and computed at once
/// for rules that read it. Client MD5s are still
/// checked inline, and a mismatch stores nothing.
@Suite struct BackgroundMD5AnswerTests {
  static let large: [UInt8] = (0..<(Int(FileStore.inlineMD5Limit) + 1000)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) }
  static var largeMD5: String { Data(Digest.hash(.md5, large)).base64EncodedString() }

  func post(_ s: some ServiceHarness, _ name: String, _ body: [UInt8], headers: [(String, String)] = []) throws
    -> WireResponse
  {
    try s.send(.init("POST", "/v0/b/app/o?name=\(enc(name))", headers: headers, body: body))
  }

  @Test func aLargeUploadAnswersWithoutMD5HashAndMetadataHasItOnceHashed() throws {
    try withInProcessService { s in
      let r = try post(s, "big.bin", Self.large)
      #expect(r.status == 200, "\(r.text)")
      #expect(r.json?["md5Hash"] == nil)
      #expect(r.json?["sha256"] as? String == sha256Hex(Self.large))
      #expect(r.json?["size"] as? String == String(Self.large.count))
      var meta = try s.send(.get("/v0/b/app/o/big.bin")).json
      let deadline = Date().addingTimeInterval(30)
      while meta?["md5Hash"] == nil, Date() < deadline {
        usleep(20_000)
        meta = try s.send(.get("/v0/b/app/o/big.bin")).json
      }
      #expect(meta?["md5Hash"] as? String == Self.largeMD5)
      #expect(try s.send(.get("/v0/b/app/o/big.bin?alt=media")).body == Self.large)
    }
  }

  @Test func aLargeUploadWithAWrongContentMD5Is400AndStoresNothing() throws {
    try withInProcessService { s in
      let wrong = Data(Digest.hash(.md5, Array("other".utf8))).base64EncodedString()
      let r = try post(s, "big.bin", Self.large, headers: [("Content-MD5", wrong)])
      #expect(r.status == 400, "\(r.text)")
      #expect(r.text.contains("md5"))
      #expect(try s.rowCounts() == ["objects": 0, "files": 0, "blobs": 0])
      #expect(s.tmpEntries() == [])
      #expect(s.blobFiles() == [])
      let right = try post(s, "big.bin", Self.large, headers: [("Content-MD5", Self.largeMD5)])
      #expect(right.status == 200, "\(right.text)")
      // Verified inline, so known at once.
      #expect(right.json?["md5Hash"] as? String == Self.largeMD5)
    }
  }

  @Test func aLargeFirebaseUploadWithAWrongMD5HashIsRefused() throws {
    try withInProcessService { s in
      let wrong = Data(Digest.hash(.md5, Array("other".utf8))).base64EncodedString()
      let json: [String: Any] = ["name": "big.bin", "contentType": "application/octet-stream", "md5Hash": wrong]
      let r = try s.send(FirebaseWire.multipart("big.bin", content: Self.large, json: json))
      #expect(r.status == 400, "\(r.text)")
      #expect(r.error?["status"] as? String == "INVALID_ARGUMENT")
      #expect(try s.rowCounts() == ["objects": 0, "files": 0, "blobs": 0])
      #expect(s.tmpEntries() == [])
      let good: [String: Any] = ["name": "big.bin", "contentType": "application/octet-stream", "md5Hash": Self.largeMD5]
      let ok = try s.send(FirebaseWire.multipart("big.bin", content: Self.large, json: good))
      #expect(ok.status == 200, "\(ok.text)")
      #expect(ok.json?["md5Hash"] as? String == Self.largeMD5)
    }
  }

  /// The Firebase SDKs hand the finished upload's metadata to the app: those answers carry
  /// `md5Hash` whatever the size (computed after the commit), unlike Larder's own POST.
  @Test func aLargeFirebaseUploadAnswersWithMD5Hash() throws {
    try withInProcessService { s in
      let json: [String: Any] = ["name": "big.bin", "contentType": "application/octet-stream"]
      let r = try s.send(FirebaseWire.multipart("big.bin", content: Self.large, json: json))
      #expect(r.status == 200, "\(r.text)")
      #expect(r.json?["md5Hash"] as? String == Self.largeMD5)
      #expect(r.json?["size"] as? String == String(Self.large.count))
      #expect(try s.send(.get("/v0/b/app/o/big.bin")).json?["md5Hash"] as? String == Self.largeMD5)
    }
  }

  /// The early ask, before any byte, sees `md5Hash` unknown; the admission step inside the write and
  /// reads of stored objects see it, computed at once if the background hasher has not yet.
  @Test func rulesThatReadMD5HashSeeItForLargeContent() throws {
    let rules = try temporaryRulesFile(
      """
      rules_version = '2';
      service firebase.storage {
        match /b/{bucket}/o {
          match /{name} {
            allow create: if request.resource.md5Hash in ['', '\(Self.largeMD5)'];
            allow get: if resource.md5Hash == '\(Self.largeMD5)';
          }
        }
      }
      """)
    defer { try? FileManager.default.removeItem(at: rules) }
    try withInProcessRulesService(rules: rules) { s in
      let denied = try post(s, "other.bin", Self.large + [1])
      #expect(denied.status == 403, "\(denied.text)")
      #expect(denied.error?["status"] as? String == "PERMISSION_DENIED")
      #expect(try s.rowCounts()["objects"] == 0)
      let r = try post(s, "big.bin", Self.large)
      #expect(r.status == 200, "\(r.text)")
      #expect(r.json?["md5Hash"] as? String == Self.largeMD5)
      #expect(r.json?["downloadTokens"] != nil)  // the get rule read the MD5 too
      let meta = try s.send(.get("/v0/b/app/o/big.bin"))
      #expect(meta.status == 200, "\(meta.text)")
      #expect(meta.json?["md5Hash"] as? String == Self.largeMD5)
    }
  }
}
