/// The formats a variant can be encoded in.
public enum ImageFormat: String, Sendable, CaseIterable {
  case jpeg, png, webp, avif

  public var contentType: String { "image/\(rawValue)" }

  /// The format of a source of this detected type, if a variant may keep it (`format=origin`).
  /// GIF and TIFF sources become PNG: libvips 8.14 writes no GIF without ImageMagick.
  public init?(sourceType: String) {
    switch sourceType.lowercased() {
    case "image/jpeg", "image/jpg": self = .jpeg
    case "image/png", "image/gif", "image/tiff": self = .png
    case "image/webp": self = .webp
    case "image/avif", "image/heif", "image/heic": self = .avif
    default: return nil
    }
  }

  /// Whether a source of this detected type is an image Larder transforms (SVG is not: it is
  /// active content, and libvips would need librsvg).
  public static func isTransformable(sourceType: String) -> Bool {
    ImageFormat(sourceType: sourceType) != nil
  }
}
