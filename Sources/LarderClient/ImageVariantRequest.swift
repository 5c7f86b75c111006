import Foundation

/// An image variant to ask a download URL for: the server's `width`, `height`, `resize`, `format`
/// and `quality` parameters (see docs/images.md).
///
/// ```swift
/// let thumb = ImageVariantRequest(width: 200, height: 200, resize: .cover, format: .webp)
/// let url = try client.downloadURL(name: "photos/a.jpg", token: meta.downloadTokens[0], variant: thumb)
/// ```
/// The server checks the values (a bad one is a 400); the client only spells them.
public struct ImageVariantRequest: Sendable, Equatable {
  /// `cover` fills the box and crops the centre, `contain` fits inside it, `fill` stretches.
  public enum Resize: String, Sendable { case cover, contain, fill }
  /// `origin` keeps the source's format; nil leaves it to the server (from `Accept`).
  public enum Format: String, Sendable { case origin, webp, avif, jpeg, png }

  public var width: Int?
  public var height: Int?
  public var resize: Resize?
  public var format: Format?
  public var quality: Int?

  public init(
    width: Int? = nil, height: Int? = nil, resize: Resize? = nil, format: Format? = nil, quality: Int? = nil
  ) {
    self.width = width
    self.height = height
    self.resize = resize
    self.format = format
    self.quality = quality
  }

  /// The query parameters, in the server's names; only those set.
  public var queryItems: [(name: String, value: String)] {
    var items: [(name: String, value: String)] = []
    if let width { items.append(("width", String(width))) }
    if let height { items.append(("height", String(height))) }
    if let resize { items.append(("resize", resize.rawValue)) }
    if let format { items.append(("format", format.rawValue)) }
    if let quality { items.append(("quality", String(quality))) }
    return items
  }
}
