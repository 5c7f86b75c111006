import Foundation
import LarderAuth
import LarderCrypto
import LarderImages
import LarderServer
import LarderTestSupport
import Testing

/// Image variants on the other download URLs: the GCS JSON API's media downloads and V4 signed
/// URLs. They share the Firebase download's code path, so these check the answers (statuses,
/// headers, decoded pixels) and the access rules, not every parameter again.
@Suite struct ImageVariantOtherURLTests {
  static let gcsPaths = ["/download/storage/v1/b/app/o/photo.jpg", "/storage/v1/b/app/o/photo.jpg"]

  @Test func gcsMediaDownloadsServeVariantsWithTheirOwnHashes() throws {
    try withService { s in
      try s.upload(
        "photo.jpg", try TestImages.solid(1200, 800, as: .jpeg), headers: [("Content-Type", "image/jpeg")])
      for path in Self.gcsPaths {
        let original = try s.request("GET", path + "?alt=media")
        #expect(original.status == 200, "\(path)")
        #expect(original["Vary"] == nil, "\(path)")
        #expect(try Vips.decode(original.body).width == 1200, "\(path)")

        let r = try s.request("GET", path + "?alt=media&width=300")
        #expect(r.status == 200, "\(path)")
        #expect(r["Content-Type"] == "image/jpeg", "\(path)")
        #expect(r["Vary"] == "Accept", "\(path)")
        #expect(r["ETag"] == "\"\(sha256Hex(r.body))\"", "\(path)")
        #expect(r["Content-Length"] == String(r.body.count), "\(path)")
        // The GCS clients check the body against these: they are the variant's.
        #expect(r["X-Goog-Stored-Content-Length"] == String(r.body.count), "\(path)")
        let md5 = Data(Digest.hash(.md5, r.body)).base64EncodedString()
        #expect(r["X-Goog-Hash"]?.contains("md5=\(md5)") == true, "\(path): \(r["X-Goog-Hash"] ?? "-")")
        let image = try Vips.decode(r.body)
        #expect((image.width, image.height) == (300, 200), "\(path)")

        let webp = try s.request(
          "GET", path + "?alt=media&width=64&height=64&resize=fill&format=webp&quality=50",
          headers: [("Accept", "image/avif")])
        #expect(webp.status == 200, "\(path)")
        #expect(webp["Content-Type"] == "image/webp", "\(path)")
        #expect(webp["Vary"] == nil, "\(path)")
        #expect(try (Vips.decode(webp.body).width, Vips.decode(webp.body).height) == (64, 64), "\(path)")

        let avif = try s.request(
          "GET", path + "?alt=media&width=64", headers: [("Accept", "image/avif,image/webp,*/*")])
        #expect(avif["Content-Type"] == "image/avif", "\(path)")
        #expect(avif["Vary"] == "Accept", "\(path)")

        // Conditionals, Range, HEAD and maxSize, on the variant.
        let etag = try #require(r["ETag"])
        #expect(
          try s.request("GET", path + "?alt=media&width=300", headers: [("If-None-Match", etag)]).status
            == 304)
        let partial = try s.request("GET", path + "?alt=media&width=300", headers: [("Range", "bytes=0-9")])
        #expect(partial.status == 206, "\(path)")
        #expect(partial.body == Array(r.body.prefix(10)), "\(path)")
        #expect(partial["Content-Range"] == "bytes 0-9/\(r.body.count)", "\(path)")
        let head = try s.request("HEAD", path + "?alt=media&width=300")
        #expect(head.status == 200 && head.body.isEmpty && head["Content-Length"] == String(r.body.count))
        let capped = try s.request("GET", path + "?alt=media&width=300&maxSize=\(r.body.count - 1)")
        #expect(capped.status == 413, "\(path)")
      }
    }
  }

  @Test func gcsBadParametersAndNonImagesAreRefusedInGcsShape() throws {
    try withService { s in
      try s.upload("photo.jpg", try TestImages.solid(100, 100, as: .png))
      try s.upload("notes.txt", Array("not a picture".utf8))
      let before = try s.rowCounts()
      for query in ["width=0", "width=2501", "height=abc", "resize=crop", "format=gif", "quality=101"] {
        let r = try s.request("GET", Self.gcsPaths[0] + "?alt=media&" + query)
        #expect(r.status == 400, "\(query)")
        #expect(r.error?["code"] as? Int == 400, "\(query)")
        let errors = r.error?["errors"] as? [[String: Any]]
        #expect(errors?.first?["reason"] as? String == "invalid", "\(query): \(r.text)")
      }
      #expect(try s.rowCounts() == before)
      let text = try s.request("GET", "/download/storage/v1/b/app/o/notes.txt?alt=media&width=64")
      #expect(text.status == 415)
      #expect(text.error?["code"] as? Int == 415)
      #expect(try s.request("GET", "/download/storage/v1/b/app/o/notes.txt?alt=media").status == 200)
    }
  }

  @Test func gcsVariantIsReadableExactlyWhenItsSourceIs() throws {
    try withService(policy: .rulesFile(try ImageVariantDownloadTests.rules())) { s in
      try s.upload("photo.jpg", try TestImages.solid(200, 200, as: .jpeg), headers: s.auth("u1"))
      for path in Self.gcsPaths {
        let target = path + "?alt=media&width=20"
        #expect(try s.request("GET", target).status == 403, "\(path)")
        #expect(try s.request("GET", target, headers: s.auth("u2")).status == 403, "\(path)")
        let allowed = try s.request("GET", target, headers: s.auth("u1"))
        #expect(allowed.status == 200, "\(path)")
        #expect(try Vips.decode(allowed.body).width == 20, "\(path)")
      }
      #expect(
        try s.request(
          "GET", "/download/storage/v1/b/app/o/missing.jpg?alt=media&width=20", headers: s.auth("u1")
        ).status == 404)
    }
  }

  /// The signature covers the whole query, image parameters included: a URL signed for the
  /// original cannot be turned into renders by appending parameters, nor one signed for a
  /// variant into another variant.
  @Test func signedURLsServeTheVariantTheySignedAndNoOther() throws {
    typealias Accounts = ServiceAccountServerTests
    try Accounts().withAccount { s, account, _ in
      let name = "secret/photo.jpg"
      let put = try s.send(
        WireRequest(
          "PUT", try Accounts.signed("PUT", "app", name, account: account),
          headers: [("Content-Type", "image/jpeg")], body: try TestImages.solid(1200, 800, as: .jpeg)))
      #expect(put.status == 200, "\(put.text)")
      let variantQuery: [(name: String, value: String)] = [("width", "64"), ("format", "png")]
      let signedVariant = try Accounts.signed("GET", "app", name, account: account, extra: variantQuery)
      let r = try s.send(.get(signedVariant))
      #expect(r.status == 200, "\(r.text)")
      #expect(r["Content-Type"] == "image/png")
      #expect(r["Vary"] == nil)
      #expect(r["ETag"] == "\"\(sha256Hex(r.body))\"")
      let image = try Vips.decode(r.body)
      #expect((image.width, image.height) == (64, 43))
      let head = try s.send(
        .head(try Accounts.signed("HEAD", "app", name, account: account, extra: variantQuery)))
      #expect(head.status == 200)
      #expect(head["Content-Length"] == String(r.body.count))

      let signedOriginal = try Accounts.signed("GET", "app", name, account: account)
      let original = try s.send(.get(signedOriginal))
      #expect(original.status == 200)
      #expect(try Vips.decode(original.body).width == 1200)
      for (label, tampered) in [
        ("appended width", signedOriginal + "&width=64"),
        ("appended format", signedOriginal + "&format=webp"),
        ("changed width", signedVariant.replacingOccurrences(of: "width=64", with: "width=2000")),
        ("added height", signedVariant + "&height=10"),
      ] {
        let refused = try s.send(.get(tampered))
        #expect(refused.status == 403, "\(label): \(refused.status)")
        #expect((refused.error?["message"] as? String)?.isEmpty == false, "\(label)")
      }
      // A bad image parameter that was signed is the variant's own 400, after the signature.
      let bad = try s.send(
        .get(try Accounts.signed("GET", "app", name, account: account, extra: [("width", "0")])))
      #expect(bad.status == 400)
    }
  }
}
