import Foundation
import LarderImages
import LarderTestSupport
import Testing

/// libvips through LarderImages: every result is decoded again and its size, bands, colour and
/// pixels checked.
@Suite struct ImageRenderingTests {
  func render(_ source: [UInt8], _ t: ImageTransform, _ f: ImageFormat, maxPixels: Int64 = 50_000_000) throws
    -> Vips.Image
  {
    let bytes = try ImageVariants.render(source, transform: t, format: f, maxPixels: maxPixels)
    let image = try Vips.decode(bytes)
    #expect(try Vips.header(of: bytes).loader.lowercased().contains(f == .avif ? "heif" : f.rawValue))
    return image
  }

  @Test func resizeModesGiveSupabaseDimensions() throws {
    let source = try TestImages.solid(400, 200, as: .jpeg)
    let cases: [(Int?, Int?, ImageTransform.Resize, Int, Int)] = [
      (100, 100, .cover, 100, 100), (100, 100, .contain, 100, 50), (100, 100, .fill, 100, 100),
      (100, nil, .cover, 100, 50), (nil, 50, .cover, 100, 50), (nil, nil, .cover, 400, 200),
    ]
    for (w, h, r, ew, eh) in cases {
      let image = try render(source, ImageTransform(width: w, height: h, resize: r), .jpeg)
      #expect(
        (image.width, image.height) == (ew, eh), "\(String(describing: w))x\(String(describing: h)) \(r)")
    }
  }

  @Test func everyOutputFormatEncodesAndDecodes() throws {
    let source = try TestImages.solid(640, 480, as: .png)
    for format in ImageFormat.allCases {
      let image = try render(source, ImageTransform(width: 64), format)
      #expect((image.width, image.height) == (64, 48), "\(format)")
      let p = try image.pixel(x: 10, y: 10)
      #expect(abs(p[0] - 200) < 12 && abs(p[1] - 30) < 12, "\(format): \(p)")
    }
  }

  @Test func alphaIsKeptWhereTheFormatHasIt() throws {
    let source = try TestImages.solid(100, 100, [0, 0, 255, 0], as: .png)  // fully transparent blue
    for format in [ImageFormat.png, .webp, .avif] {
      let image = try render(source, ImageTransform(width: 50), format)
      #expect(image.hasAlpha && image.bands == 4, "\(format)")
      #expect(try image.pixel(x: 5, y: 5)[3] == 0, "\(format)")
    }
    let jpeg = try render(source, ImageTransform(width: 50), .jpeg)
    #expect(!jpeg.hasAlpha && jpeg.bands == 3)
    // Flattened onto white: transparent becomes white, not black.
    #expect(try jpeg.pixel(x: 5, y: 5).allSatisfy { $0 > 240 })
  }

  @Test func exifOrientationIsApplied() throws {
    let source = try TestImages.orientedJPEG()
    #expect(try Vips.decode(source).orientation == 6)
    let image = try render(source, ImageTransform(height: 150), .png)
    #expect((image.width, image.height) == (100, 150))
    let kept = try render(source, ImageTransform(format: .fixed(.png)), .png)
    #expect((kept.width, kept.height) == (200, 300))
  }

  @Test func cmykBecomesSRGB() throws {
    let source = try TestImages.cmykJPEG()
    #expect(try Vips.decode(source).isCMYK)
    let image = try render(source, ImageTransform(width: 60), .png)
    #expect(image.isRGB && image.bands == 3 && (image.width, image.height) == (60, 40))
    let p = try image.pixel(x: 5, y: 5)
    // Through libvips' fallback CMYK profile, ImageMagick's naive CMYK blue is a dark blue (as vipsthumbnail gives).
    #expect(p[2] > 100 && p[2] > p[0] + 60 && p[2] > p[1] + 60, "blue stays blue: \(p)")
  }

  @Test func animatedGIFGivesItsFirstFrame() throws {
    let source = try TestImages.animatedGIF()
    #expect(try Vips.header(of: source).pages == 2)
    let image = try render(source, ImageTransform(width: 50), .png)
    #expect((image.width, image.height) == (50, 25))
    let p = try image.pixel(x: 5, y: 5)
    #expect(p[0] > 200 && p[2] < 50, "the first frame is red: \(p)")
  }

  @Test func webpAndAvifSourcesAreRead() throws {
    for format in [ImageFormat.webp, .avif] {
      let image = try render(try TestImages.solid(300, 300, as: format), ImageTransform(width: 30), .jpeg)
      #expect((image.width, image.height) == (30, 30), "\(format)")
    }
  }

  @Test func decompressionBombIsRefusedFromItsHeader() throws {
    let bomb = try TestImages.bomb()
    #expect(bomb.count < 1_200_000)
    let header = try Vips.header(of: bomb)
    #expect((header.width, header.height, header.pages) == (30_000, 30_000, 1))
    #expect(header.loader == "VipsForeignLoadPngBuffer")
    let started = ContinuousClock.now
    #expect(throws: ImageError.tooManyPixels(width: 30_000, height: 30_000, limit: 50_000_000)) {
      _ = try ImageVariants.render(
        bomb, transform: ImageTransform(width: 64), format: .webp, maxPixels: 50_000_000)
    }
    // Not decoded: 900 MB of pixels would take seconds and the memory with them.
    #expect(ContinuousClock.now - started < .seconds(2))
  }

  @Test func undecodableBytesAreADecodeFailure() throws {
    let jpeg = try TestImages.solid(200, 200, as: .jpeg)
    #expect {
      _ = try ImageVariants.render(
        Array(jpeg.prefix(300)), transform: ImageTransform(width: 64), format: .png, maxPixels: 50_000_000)
    } throws: { error in
      guard case .decodeFailed(let reason) = error as? ImageError else { return false }
      return !reason.isEmpty
    }
  }

  @Test func parametersAreCheckedAndCanonical() throws {
    let bad: [[String: String]] = [
      ["width": "0"], ["width": "2501"], ["height": "-1"], ["width": "1e3"], ["resize": "crop"],
      ["format": "gif"], ["quality": "0"], ["quality": "101"], ["quality": ""],
    ]
    for query in bad {
      #expect(throws: ImageError.self, "\(query)") {
        _ = try ImageTransform(query: query, maxDimension: 2500)
      }
    }
    #expect(try ImageTransform(query: ["alt": "media"], maxDimension: 2500) == nil)
    let t = try #require(try ImageTransform(query: ["width": "64", "quality": "70"], maxDimension: 2500))
    #expect(t.canonical(format: .webp) == "v1;w=64;h=0;r=cover;f=webp;q=70")
    #expect(t.canonical(format: .png) == "v1;w=64;h=0;r=cover;f=png;q=0")
  }

  /// Issue 31.3: AVIF or WebP only when `Accept` names them; else the source's format when
  /// every browser shows it (GIF as PNG); else JPEG, or PNG when the source has alpha.
  @Test func theFormatIsOneTheClientCanShow() throws {
    // The last column: whether the answer depends on the source's alpha (its header is read).
    let cases: [(String, ImageTransform.Format?, String?, Bool, ImageFormat, Bool)] = [
      ("image/jpeg", nil, "image/avif,image/webp,*/*", false, .avif, false),
      ("image/jpeg", nil, "image/avif;q=0, image/webp", false, .webp, false),
      ("image/jpeg", nil, "*/*", false, .jpeg, false),
      ("image/jpeg", nil, "image/*", false, .jpeg, false),
      ("image/png", nil, "*/*", true, .png, false),
      ("image/gif", nil, nil, false, .png, false),
      ("image/webp", nil, "*/*", true, .webp, false),
      ("image/heic", nil, "*/*", false, .jpeg, true),
      ("image/heic", nil, nil, false, .jpeg, true),
      ("image/heic", nil, "*/*", true, .png, true),
      ("image/heic", nil, "image/webp,*/*", false, .webp, false),
      ("image/heic", nil, "image/avif,*/*", false, .avif, false),
      ("image/avif", nil, "*/*", false, .jpeg, true),
      ("image/avif", nil, "image/avif", false, .avif, false),
      ("image/tiff", nil, "*/*", true, .png, true),
      ("image/tiff", nil, "*/*", false, .jpeg, true),
      ("image/heic", .origin, "image/avif", false, .jpeg, true),
      ("image/avif", .origin, nil, false, .avif, false),
      ("image/gif", .origin, nil, false, .png, false),
      ("image/heic", .fixed(.webp), nil, false, .webp, false),
    ]
    for (source, format, accept, alpha, expected, reads) in cases {
      let t = ImageTransform(width: 64, format: format)
      var asked = false
      let got = t.outputFormat(sourceType: source, accept: accept) {
        asked = true
        return alpha
      }
      #expect(got == expected, "\(source) \(String(describing: format)) \(accept ?? "no Accept")")
      #expect(asked == reads, "\(source) \(String(describing: format)) \(accept ?? "no Accept")")
    }
  }
}
