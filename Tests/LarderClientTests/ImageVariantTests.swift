import Foundation
import LarderClient
import LarderImages
import LarderTestSupport
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Image variants through `LarderClient` against a live server: the URL it builds, the download,
/// and the server's refusals as typed errors.
@Suite struct ImageVariantTests {
  @Test func downloadURLWithATokenServesTheVariantWithoutAuthorization() async throws {
    try await withServer { _, client in
      let meta = try await client.upload(
        Data(try TestImages.solid(1200, 800, as: .jpeg)), name: "photos/a b.jpg", contentType: "image/jpeg")
      let token = try #require(meta.downloadTokens.first)
      let variant = ImageVariantRequest(width: 64, height: 64, resize: .fill, format: .webp, quality: 50)
      let url = try client.downloadURL(name: "photos/a b.jpg", token: token, variant: variant)
      #expect(
        url.absoluteString.hasSuffix(
          "/v0/b/app/o/photos%2Fa%20b.jpg?alt=media&token=\(token)&width=64&height=64&resize=fill&format=webp&quality=50"
        ),
        "\(url)")
      // A plain GET, as an <img> would send: no Authorization.
      let session = URLSession(configuration: .ephemeral)
      defer { session.invalidateAndCancel() }
      let (body, answer) = try await session.data(from: url)
      let response = try #require(answer as? HTTPURLResponse)
      #expect(response.statusCode == 200)
      #expect(response.value(forHTTPHeaderField: "Content-Type") == "image/webp")
      let image = try Vips.decode([UInt8](body))
      #expect((image.width, image.height) == (64, 64))
      // Without a variant it is the original's URL.
      let plain = try client.downloadURL(name: "photos/a b.jpg", token: token)
      #expect(plain.absoluteString.hasSuffix("/v0/b/app/o/photos%2Fa%20b.jpg?alt=media&token=\(token)"))
    }
  }

  @Test func downloadOfAVariantReturnsItsBytesTypeAndETag() async throws {
    try await withServer { _, client in
      try await client.upload(Data(try TestImages.solid(1200, 800, as: .png)), name: "a.png")
      let thumb = try await client.download(name: "a.png", variant: .init(width: 300))
      #expect(thumb.contentType == "image/png")
      #expect(
        try (Vips.decode([UInt8](thumb.data)).width, Vips.decode([UInt8](thumb.data)).height) == (300, 200))
      #expect(thumb.etag?.count == 66)  // the variant's SHA-256, quoted
      let negotiated = try await client.download(
        name: "a.png", variant: .init(width: 100), accept: "image/avif,image/webp,*/*")
      #expect(negotiated.contentType == "image/avif")
      #expect(try Vips.decode([UInt8](negotiated.data)).width == 100)
    }
  }

  @Test func refusalsArriveAsTypedErrors() async throws {
    try await withServer { _, client in
      try await client.upload(Data(try TestImages.solid(200, 200, as: .jpeg)), name: "a.jpg")
      try await client.upload(Data("text".utf8), name: "notes.txt")
      func status(_ name: String, _ variant: ImageVariantRequest, maxSize: Int64? = nil) async -> Int? {
        do {
          _ = try await client.download(name: name, variant: variant, maxSize: maxSize)
          return 200
        } catch {
          if case .server(let e) = error { return e.code }
          if case .tooLarge = error { return 413 }
          return nil
        }
      }
      #expect(await status("a.jpg", .init(width: 0)) == 400)
      #expect(await status("a.jpg", .init(width: 10, quality: 101)) == 400)
      #expect(await status("notes.txt", .init(width: 10)) == 415)
      #expect(await status("missing.jpg", .init(width: 10)) == 404)
      #expect(await status("a.jpg", .init(width: 100, format: .png), maxSize: 10) == 413)
    }
  }
}
