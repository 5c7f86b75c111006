/// The formats a variant can be encoded in.
public enum ImageFormat: String, Sendable, CaseIterable {
  case jpeg, png, webp, avif

  public var contentType: String { "image/\(rawValue)" }

  /// The format a variant keeps for a source of this detected type when every browser shows it:
  /// JPEG, PNG, WebP, and GIF as PNG (libvips 8.14 writes no GIF without ImageMagick). Nil for
  /// the rest (AVIF, HEIC/HEIF, TIFF), which some browsers cannot show.
  public init?(everyBrowserShows sourceType: String) {
    switch sourceType.lowercased() {
    case "image/jpeg", "image/jpg": self = .jpeg
    case "image/png", "image/gif": self = .png
    case "image/webp": self = .webp
    default: return nil
    }
  }

  /// The format `format=origin` keeps: the source's when a variant can be written in it (AVIF
  /// too), GIF as PNG; nil for HEIC/HEIF and TIFF (then JPEG, or PNG with alpha).
  public init?(origin sourceType: String) {
    if let format = ImageFormat(everyBrowserShows: sourceType) {
      self = format
    } else if sourceType.lowercased() == "image/avif" {
      self = .avif
    } else {
      return nil
    }
  }

  /// Whether a source of this detected type is an image Larder transforms (SVG is not: it is
  /// active content, and libvips would need librsvg).
  public static func isTransformable(sourceType: String) -> Bool {
    switch sourceType.lowercased() {
    case "image/jpeg", "image/jpg", "image/png", "image/gif", "image/tiff", "image/webp", "image/avif",
      "image/heif", "image/heic":
      true
    default: false
    }
  }
}
