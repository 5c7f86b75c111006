/// What a variant asks of its source: `width`, `height`, `resize`, `format`, `quality`.
///
/// ```swift
/// let t = try ImageTransform(query: ["width": "200", "resize": "cover"], maxDimension: 2500)
/// t.canonical(format: .webp)   // "w=200;h=0;r=cover;f=webp;q=80"
/// ```
/// The canonical form names every parameter, defaults filled in, so two URLs asking for the
/// same image share one cached variant.
public struct ImageTransform: Sendable, Equatable {
  /// Supabase's meanings: `cover` fills the box and crops the excess (centre), `contain` fits
  /// inside it keeping the aspect, `fill` stretches to it exactly.
  public enum Resize: String, Sendable, CaseIterable { case cover, contain, fill }
  /// The requested format; `origin` keeps the source's (see ``outputFormat(sourceType:accept:sourceHasAlpha:)``).
  public enum Format: Sendable, Equatable {
    case origin
    case fixed(ImageFormat)
  }

  public var width: Int?
  public var height: Int?
  public var resize: Resize
  /// Nil: not asked, chosen from `Accept` (then the source's format).
  public var format: Format?
  public var quality: Int

  public static let defaultQuality = 80
  /// The query parameters that ask for a variant.
  public static let parameterNames = ["width", "height", "resize", "format", "quality"]

  public init(
    width: Int? = nil, height: Int? = nil, resize: Resize? = nil, format: Format? = nil, quality: Int? = nil
  ) {
    self.width = width
    self.height = height
    self.resize = resize ?? .cover
    self.format = format
    self.quality = quality ?? Self.defaultQuality
  }

  /// The transform a query asks for, nil when it names no transform parameter.
  /// - Throws: ``ImageError/invalidParameter(_:)`` for a width or height outside 1…`maxDimension`,
  ///   an unknown `resize` or `format`, a `quality` outside 1–100.
  public init?(query value: (String) -> String?, maxDimension: Int) throws(ImageError) {
    guard Self.parameterNames.contains(where: { value($0) != nil }) else { return nil }
    func dimension(_ name: String) throws(ImageError) -> Int? {
      guard let text = value(name) else { return nil }
      return try Self.checkDimension(name, Self.integer(text) ?? -1, max: maxDimension, shown: text)
    }
    width = try dimension("width")
    height = try dimension("height")
    if let text = value("resize") {
      guard let r = Resize(rawValue: text) else {
        throw .invalidParameter("resize must be cover, contain or fill, got '\(text.prefix(40))'")
      }
      resize = r
    } else {
      resize = .cover
    }
    if let text = value("format") {
      if text == "origin" {
        format = .origin
      } else if let f = ImageFormat(rawValue: text) {
        format = .fixed(f)
      } else {
        throw .invalidParameter("format must be origin, webp, avif, jpeg or png, got '\(text.prefix(40))'")
      }
    } else {
      format = nil
    }
    if let text = value("quality") {
      quality = try Self.checkQuality(Self.integer(text) ?? -1, shown: text)
    } else {
      quality = Self.defaultQuality
    }
  }

  /// `value` when it is a width or height from 1 to `max`.
  /// - Throws: ``ImageError/invalidParameter(_:)`` naming the parameter and what was `shown`.
  static func checkDimension(_ name: String, _ value: Int, max: Int, shown: String) throws(ImageError) -> Int
  {
    guard value >= 1, value <= max else {
      throw .invalidParameter("\(name) must be an integer from 1 to \(max), got '\(shown.prefix(40))'")
    }
    return value
  }

  /// `value` when it is a quality from 1 to 100.
  static func checkQuality(_ value: Int, shown: String) throws(ImageError) -> Int {
    guard (1...100).contains(value) else {
      throw .invalidParameter("quality must be an integer from 1 to 100, got '\(shown.prefix(40))'")
    }
    return value
  }

  public init?(query: [String: String], maxDimension: Int) throws(ImageError) {
    try self.init(query: { query[$0] }, maxDimension: maxDimension)
  }

  /// The output format: the one asked for; else AVIF or WebP when `Accept` names it; else the
  /// source's when every browser shows it (GIF as PNG); else JPEG, or PNG when the source has
  /// alpha. `format=origin` keeps the source's (AVIF too; HEIC and TIFF as the last rule says).
  /// `sourceHasAlpha` is asked only when the answer depends on it.
  public func outputFormat(sourceType: String, accept: String?, sourceHasAlpha: () throws -> Bool) rethrows
    -> ImageFormat
  {
    switch format {
    case .fixed(let f): return f
    case .origin:
      if let f = ImageFormat(origin: sourceType) { return f }
    case nil:
      let accepted = Self.acceptedTypes(accept)
      if accepted.contains("image/avif") { return .avif }
      if accepted.contains("image/webp") { return .webp }
      if let f = ImageFormat(everyBrowserShows: sourceType) { return f }
    }
    return try sourceHasAlpha() ? .png : .jpeg
  }

  /// The cache key's parameter part: every parameter, in one order, with the format decided.
  /// PNG is lossless: its quality is not part of the key.
  public func canonical(format: ImageFormat) -> String {
    let q = format == .png ? 0 : quality
    return "v1;w=\(width ?? 0);h=\(height ?? 0);r=\(resize.rawValue);f=\(format.rawValue);q=\(q)"
  }

  /// The box libvips is asked for, and how: one side given keeps the aspect (the other side
  /// unbounded); neither keeps the source's size.
  func box(source: Vips.Header) -> (width: Int, height: Int, crop: Bool, force: Bool) {
    let unbounded = 10_000_000
    switch (width, height) {
    case (let w?, let h?): return (w, h, resize == .cover, resize == .fill)
    case (let w?, nil): return (w, unbounded, false, false)
    case (nil, let h?): return (unbounded, h, false, false)
    // The longest side either way round: EXIF orientation may swap width and height.
    case (nil, nil): return (max(source.width, source.height), max(source.width, source.height), false, false)
    }
  }

  /// Media types an `Accept` header takes with a quality above zero.
  static func acceptedTypes(_ accept: String?) -> Set<String> {
    guard let accept else { return [] }
    var types = Set<String>()
    for part in accept.split(separator: ",") {
      let fields = part.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
      guard let type = fields.first, !type.isEmpty else { continue }
      let refused = fields.dropFirst().contains { $0.hasPrefix("q=") && (Double($0.dropFirst(2)) ?? 1) <= 0 }
      if !refused { types.insert(type) }
    }
    return types
  }

  private static func integer(_ text: String) -> Int? {
    guard !text.isEmpty, text.count <= 9, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
      return nil
    }
    return Int(text)
  }
}
