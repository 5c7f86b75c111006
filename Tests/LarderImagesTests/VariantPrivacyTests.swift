import Foundation
import LarderImages
import LarderTestSupport
import Testing

/// Issue 31.2: a variant reveals nothing of its source but its pixels. A phone photo's EXIF
/// (GPS position included), XMP and IPTC are in no variant of any format; the orientation is in
/// the pixels; the colour is converted to sRGB and no profile is embedded.
@Suite struct VariantPrivacyTests {
  /// The test photo is what the checks below need it to be: the scan finds every kind of
  /// metadata in it, libvips reads its orientation, and its pixels are not sRGB's values.
  @Test func thePhoneJPEGCarriesEveryKindOfMetadata() throws {
    let source = try TestImages.phoneJPEG()
    #expect(
      ImageMetadataScan.markers(in: source) == [
        "JPEG APP1 Exif", "JPEG APP1 XMP", "JPEG APP13 IPTC", "JPEG APP2 ICC_PROFILE",
      ])
    let decoded = try Vips.decode(source)
    #expect(decoded.orientation == 6)
    #expect((decoded.width, decoded.height) == (40, 20))
    // Display P3's numbers for sRGB (120, 200, 60): a variant that keeps them shows the wrong colour.
    let p = try decoded.pixel(x: 5, y: 5)
    #expect(abs(p[0] - 120) > 12 && abs(p[2] - 60) > 12, "\(p)")
  }

  @Test func everyFormatKeepsNoMetadataAndShowsTheRightWayUpInSRGB() throws {
    let source = try TestImages.phoneJPEG()
    for format in ImageFormat.allCases {
      for (transform, size) in [
        (ImageTransform(format: .fixed(format), quality: 95), (20, 40)),
        (ImageTransform(width: 10, format: .fixed(format), quality: 95), (10, 20)),
      ] {
        let bytes = try ImageVariants.render(
          source, transform: transform, format: format, maxPixels: 50_000_000)
        #expect(ImageMetadataScan.markers(in: bytes) == [], "\(format)")
        let image = try Vips.decode(bytes)
        // 40x20 stored with orientation 6 is shown 20x40: the rotation is in the pixels.
        #expect((image.width, image.height) == size, "\(format)")
        #expect(image.orientation == 1, "\(format)")
        let p = try image.pixel(x: image.width / 2, y: image.height / 2)
        #expect(abs(p[0] - 120) < 8 && abs(p[1] - 200) < 8 && abs(p[2] - 60) < 8, "\(format): \(p)")
      }
    }
  }

  /// The scan understands each container: metadata a save keeps is found in every format
  /// (libvips 8.14 writes no EXIF into PNG, only the profile).
  @Test func theScanFindsMetadataInEveryContainer() throws {
    let image = try Vips.solid(width: 8, height: 8, value: [10, 20, 30]).withProfile("p3").oriented(6)
    let expected: [ImageFormat: String] = [
      .jpeg: "JPEG APP1 Exif", .png: "PNG iCCP", .webp: "WebP EXIF", .avif: "HEIF item Exif",
    ]
    for format in ImageFormat.allCases {
      let kept = try image.encoded(as: format, quality: 90, keepMetadata: true)
      #expect(ImageMetadataScan.markers(in: kept).contains(expected[format]!), "\(format)")
    }
  }
}
