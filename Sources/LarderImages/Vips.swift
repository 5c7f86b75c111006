internal import CVips
import Foundation

/// libvips, behind one wrapper: no other file imports `CVips`.
///
/// ```swift
/// let header = try Vips.header(of: bytes)          // reads the header only
/// let image = try Vips.thumbnail(bytes, width: 256, height: 256, crop: true, force: false)
/// let webp = try image.encoded(as: .webp, quality: 80)
/// ```
/// Every call is safe from any thread (libvips is thread-safe once initialised).
public enum Vips {
  private static let initialised: Bool = larder_vips_init() == 0

  /// What an image's header says, read without decoding a pixel.
  public struct Header: Sendable, Equatable {
    public var width: Int
    /// The height of one page (frame).
    public var height: Int
    public var pages: Int
    /// Whether it has an alpha band (transparency).
    public var hasAlpha: Bool
    /// libvips' loader class (`VipsForeignLoadJpegBuffer`, …).
    public var loader: String
    public var pixels: Int64 { Int64(width) * Int64(height) }
  }

  /// The header of the encoded image in `bytes`.
  /// - Throws: ``VipsError`` when libvips knows no loader for it or cannot read its header.
  public static func header(of bytes: [UInt8]) throws(VipsError) -> Header {
    try ready()
    var width: Int32 = 0
    var height: Int32 = 0
    var pages: Int32 = 0
    var alpha: Int32 = 0
    var loader = [CChar](repeating: 0, count: 128)
    let result = bytes.withUnsafeBytes { raw in
      larder_vips_header(raw.baseAddress, raw.count, &width, &height, &pages, &alpha, &loader, loader.count)
    }
    guard result == 0 else { throw lastError() }
    let name = loader.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    return Header(
      width: Int(width), height: Int(height), pages: Int(pages), hasAlpha: alpha != 0, loader: name)
  }

  /// A thumbnail of the encoded image in `bytes`, shrunk on load, oriented, in sRGB, with no
  /// metadata (no EXIF, XMP, IPTC or profile: a save writes none of the source's); first page.
  /// - Throws: ``VipsError`` carrying libvips' reason when the image cannot be decoded.
  public static func thumbnail(_ bytes: [UInt8], width: Int, height: Int, crop: Bool, force: Bool)
    throws(VipsError)
    -> Image
  {
    try ready()
    let image = bytes.withUnsafeBytes { raw in
      larder_vips_thumbnail(
        raw.baseAddress, raw.count, Int32(width), Int32(height), crop ? 1 : 0, force ? 1 : 0)
    }
    guard let image else { throw lastError() }
    return Image(image)
  }

  /// Decodes a whole image (to read a result back).
  public static func decode(_ bytes: [UInt8]) throws(VipsError) -> Image {
    try ready()
    let image = bytes.withUnsafeBytes { raw in larder_vips_load(raw.baseAddress, raw.count) }
    guard let image else { throw lastError() }
    return Image(image)
  }

  /// A solid image: 3 bands (sRGB) or 4 (sRGB with alpha); for tests and tools.
  public static func solid(width: Int, height: Int, value: [Double]) throws(VipsError) -> Image {
    try ready()
    let image = value.withUnsafeBufferPointer {
      larder_vips_solid(Int32(width), Int32(height), Int32(value.count), $0.baseAddress)
    }
    guard let image else { throw lastError() }
    return Image(image)
  }

  /// An image in memory; freed with its last reference.
  public final class Image: @unchecked Sendable {
    // A VipsImage is immutable once built, and libvips is thread-safe: @unchecked is sound.
    private let handle: UnsafeMutablePointer<VipsImage>

    fileprivate init(_ handle: UnsafeMutablePointer<VipsImage>) { self.handle = handle }
    deinit { larder_vips_unref(handle) }

    public var width: Int { Int(larder_vips_width(handle)) }
    public var height: Int { Int(larder_vips_height(handle)) }
    public var bands: Int { Int(larder_vips_bands(handle)) }
    public var hasAlpha: Bool { larder_vips_has_alpha(handle) != 0 }
    /// Whether libvips sees it as sRGB (or its 16-bit / greyscale relatives), not CMYK.
    public var isRGB: Bool {
      let i = larder_vips_interpretation(handle)
      return i == Int32(VIPS_INTERPRETATION_sRGB.rawValue) || i == Int32(VIPS_INTERPRETATION_RGB16.rawValue)
    }
    public var isCMYK: Bool { larder_vips_interpretation(handle) == Int32(VIPS_INTERPRETATION_CMYK.rawValue) }
    /// The EXIF orientation tag (1 when absent).
    public var orientation: Int { Int(larder_vips_orientation(handle)) }

    /// The band values of the pixel at (x, y).
    public func pixel(x: Int, y: Int) throws(VipsError) -> [Double] {
      var out = [Double](repeating: 0, count: 4)
      let n = larder_vips_pixel(handle, Int32(x), Int32(y), &out, 4)
      guard n >= 0 else { throw Vips.lastError() }
      return Array(out.prefix(Int(n)))
    }

    /// This image with EXIF orientation `orientation` (kept by an encoding that keeps metadata).
    public func oriented(_ orientation: Int) throws(VipsError) -> Image {
      guard let copy = larder_vips_with_orientation(handle, Int32(orientation)) else {
        throw Vips.lastError()
      }
      return Image(copy)
    }

    /// This image converted to the colour profile `profile` (libvips' built-in `srgb`, `cmyk`,
    /// `p3`, or an ICC file), which it then carries: kept by an encoding that keeps metadata.
    public func withProfile(_ profile: String) throws(VipsError) -> Image {
      guard let converted = larder_vips_with_profile(handle, profile) else { throw Vips.lastError() }
      return Image(converted)
    }

    /// The image encoded; `quality` 1–100 for the lossy formats. Metadata (EXIF, profiles) is
    /// stripped unless `keepMetadata`.
    public func encoded(as format: ImageFormat, quality: Int, keepMetadata: Bool = false) throws(VipsError)
      -> [UInt8]
    {
      let code: Int32 =
        switch format {
        case .jpeg: 0
        case .png: 1
        case .webp: 2
        case .avif: 3
        }
      var buffer: UnsafeMutableRawPointer?
      var length = 0
      guard larder_vips_save(handle, code, Int32(quality), keepMetadata ? 0 : 1, &buffer, &length) == 0,
        let buffer
      else {
        throw Vips.lastError()
      }
      defer { larder_vips_free(buffer) }
      let bytes = Array(UnsafeRawBufferPointer(start: buffer, count: length))
      return format == .webp && !keepMetadata ? WebPContainer.removingMetadata(bytes) : bytes
    }
  }

  private static func ready() throws(VipsError) {
    guard initialised else { throw VipsError(message: "libvips failed to initialise") }
  }

  fileprivate static func lastError() -> VipsError {
    var text = [CChar](repeating: 0, count: 1024)
    larder_vips_error(&text, text.count)
    let message = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    return VipsError(message: message.trimmingCharacters(in: .whitespacesAndNewlines))
  }
}

/// libvips' reason for a failure.
public struct VipsError: Error, Sendable, CustomStringConvertible {
  public let message: String
  public var description: String { message.isEmpty ? "libvips failed" : message }
}
