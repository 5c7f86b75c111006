import Foundation
import Larder
import LarderImages
import LarderServer
import LarderTestSupport
import Testing

/// Image variants on Firebase download URLs, over the live server: each answer's status,
/// headers and decoded pixels.
@Suite struct ImageVariantDownloadTests {
  static let media = "/v0/b/app/o/photo.jpg?alt=media"

  func withPhoto<T>(
    configure: (inout LarderService.Options) -> Void = { _ in }, _ body: (LiveService) throws -> T
  )
    throws -> T
  {
    try withService(configure: configure) { s in
      try s.upload(
        "photo.jpg", try TestImages.solid(1200, 800, as: .jpeg), headers: [("Content-Type", "image/jpeg")])
      return try body(s)
    }
  }

  func decoded(_ r: WireResponse) throws -> Vips.Image { try Vips.decode(r.body) }

  @Test func widthOnADownloadURLReturnsTheThumbnail() throws {
    try withPhoto { s in
      let original = try s.request("GET", Self.media)
      let r = try s.request("GET", Self.media + "&width=300")
      #expect(r.status == 200)
      #expect(r["Content-Type"] == "image/jpeg")
      #expect(r["Vary"] == "Accept")
      #expect(r["ETag"] == "\"\(sha256Hex(r.body))\"")
      #expect(r["ETag"] != original["ETag"])
      #expect(r["Content-Length"] == String(r.body.count))
      let image = try decoded(r)
      #expect((image.width, image.height) == (300, 200))
      // The same again comes from the cache: the same bytes.
      #expect(try s.request("GET", Self.media + "&width=300").body == r.body)
    }
  }

  /// A hot variant is answered from its object row's memo, without the catalog. A release
  /// committed by another store on the same directory, as another process would commit it (the
  /// LRU budget, which removes the blob at once), drops that memo: the next request renders the
  /// variant again instead of pointing at a released file.
  @Test func aVariantReleasedElsewhereIsRenderedAgainNotServedFromTheMemo() throws {
    try withPhoto { s in
      let url = Self.media + "&width=120&format=webp"
      let first = try s.request("GET", url)
      #expect(first.status == 200)
      let hot = try s.request("GET", url)
      #expect(hot.status == 200 && hot.body == first.body && hot["ETag"] == first["ETag"])
      let other = try TestStore.open(at: s.directory)
      let blobs = try other.statistics().blobBytes
      #expect(try other.derived.evict(toFit: 0) == 1)
      #expect(try other.statistics().blobBytes == blobs - Int64(first.body.count))
      #expect(try GarbageCollector(larder: other).collect(options: .init(grace: .zero)).blobsRemoved == 0)
      #expect(try other.derived.statistics().count == 0)
      let again = try s.request("GET", url)
      #expect(again.status == 200)
      #expect(again["ETag"] == "\"\(sha256Hex(again.body))\"")
      let image = try decoded(again)
      #expect((image.width, image.height) == (120, 80))
      #expect(try other.derived.statistics().count == 1)
    }
  }

  @Test func acceptChoosesAvifOrWebpAndFormatOverridesIt() throws {
    try withPhoto { s in
      let cases: [(String, [(String, String)], String, String?)] = [
        ("&width=64", [("Accept", "image/avif,image/webp,*/*")], "image/avif", "Accept"),
        ("&width=64", [("Accept", "image/webp,*/*")], "image/webp", "Accept"),
        ("&width=64&format=png", [("Accept", "image/webp")], "image/png", nil),
        ("&width=64&format=origin", [("Accept", "image/webp")], "image/jpeg", nil),
        ("&width=64&height=64&resize=fill&format=webp&quality=50", [], "image/webp", nil),
      ]
      for (query, headers, type, vary) in cases {
        let r = try s.request("GET", Self.media + query, headers: headers)
        #expect(r.status == 200, "\(query)")
        #expect(r["Content-Type"] == type, "\(query)")
        #expect(r["Vary"] == vary, "\(query)")
        let image = try decoded(r)
        #expect(image.width == 64, "\(query)")
      }
    }
  }

  @Test func conditionalRangeHeadAndMaxSizeWorkOnTheVariant() throws {
    try withPhoto { s in
      let target = Self.media + "&width=100&format=png"
      let full = try s.request("GET", target)
      let etag = try #require(full["ETag"])
      let size = full.body.count
      let notModified = try s.request("GET", target, headers: [("If-None-Match", etag)])
      #expect(notModified.status == 304)
      #expect(notModified.body.isEmpty)
      let partial = try s.request("GET", target, headers: [("Range", "bytes=0-9")])
      #expect(partial.status == 206)
      #expect(partial.body == Array(full.body.prefix(10)))
      #expect(partial["Content-Range"] == "bytes 0-9/\(size)")
      let head = try s.request("HEAD", target)
      #expect(head.status == 200 && head.body.isEmpty && head["Content-Length"] == String(size))
      let capped = try s.request("GET", target + "&maxSize=\(size - 1)")
      #expect(capped.status == 413)
      #expect(capped.error?["size"] as? Int == size)
      #expect(try s.request("GET", target + "&maxSize=\(size)").status == 200)
    }
  }

  @Test func badParametersAre400AndStoreNothing() throws {
    try withPhoto { s in
      let before = try s.rowCounts()
      for query in [
        "width=0", "width=2501", "height=abc", "resize=crop", "format=gif", "quality=0", "quality=101",
      ] {
        let r = try s.request("GET", Self.media + "&" + query)
        #expect(r.status == 400, "\(query)")
        #expect(r.error?["code"] as? Int == 400, "\(query)")
        #expect((r.error?["message"] as? String)?.isEmpty == false, "\(query)")
      }
      #expect(try s.rowCounts() == before)
    }
  }

  @Test func nonImagesAre415AndBombsAndBrokenImages422() throws {
    try withService { s in
      try s.upload("notes.txt", Array("just text, not a picture".utf8))
      let text = try s.request("GET", "/v0/b/app/o/notes.txt?alt=media&width=64")
      #expect(text.status == 415)
      #expect(text.error?["code"] as? Int == 415)
      try s.upload("bomb.png", try TestImages.bomb())
      let started = ContinuousClock.now
      let bomb = try s.request("GET", "/v0/b/app/o/bomb.png?alt=media&width=64")
      #expect(bomb.status == 422)
      #expect((bomb.error?["message"] as? String)?.contains("30000x30000") == true)
      #expect(ContinuousClock.now - started < .seconds(3))
      let jpeg = try TestImages.solid(400, 400, as: .jpeg)
      try s.upload("broken.jpg", Array(jpeg.prefix(400)))
      let broken = try s.request("GET", "/v0/b/app/o/broken.jpg?alt=media&width=64")
      #expect(broken.status == 422)
      #expect(
        (broken.error?["message"] as? String)?.hasPrefix("the image could not be transformed: ") == true)
      // The original downloads are untouched.
      #expect(try s.request("GET", "/v0/b/app/o/bomb.png?alt=media").status == 200)
    }
  }

  @Test func limitsAndTheSwitchAreConfigurable() throws {
    try withPhoto(configure: { $0.images?.limits.maxPixels = 500_000 }) { (s: LiveService) throws in
      #expect(try s.request("GET", Self.media + "&width=10").status == 422)
    }
    try withPhoto(configure: { $0.images?.limits.maxSourceBytes = 100 }) { (s: LiveService) throws in
      #expect(try s.request("GET", Self.media + "&width=10").status == 413)
    }
    try withPhoto(configure: { $0.images = nil }) { s in
      let r = try s.request("GET", Self.media + "&width=10")
      #expect(r.status == 400)
      #expect((r.error?["message"] as? String)?.contains("turned off") == true)
      #expect(try s.request("GET", Self.media).status == 200)
    }
  }

  @Test func aVariantIsReadableExactlyWhenItsSourceIs() throws {
    try withService(policy: .rulesFile(try Self.rules())) { s in
      try s.upload("photo.jpg", try TestImages.solid(200, 200, as: .jpeg), headers: s.auth("u1"))
      let token = try #require(
        (try s.request("GET", "/v0/b/app/o/photo.jpg", headers: s.auth("u1")).json?["downloadTokens"]
          as? String))
      #expect(try s.request("GET", Self.media + "&width=20").status == 403)
      #expect(try s.request("GET", Self.media + "&width=20", headers: s.auth("u2")).status == 403)
      #expect(try s.request("GET", Self.media + "&width=20", headers: s.auth("u1")).status == 200)
      #expect(try s.request("GET", Self.media + "&width=20&token=\(token)").status == 200)
      #expect(try s.request("GET", Self.media + "&width=20&token=wrong").status == 403)
    }
  }

  static func rules() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-img-rules-\(UUID().uuidString)")
    try """
    rules_version = '2';
    service firebase.storage {
      match /b/{bucket}/o {
        match /{name} { allow read, write: if request.auth != null && request.auth.uid == 'u1'; }
      }
    }
    """.write(to: url, atomically: true, encoding: .utf8)
    return url
  }
}
