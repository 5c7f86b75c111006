import Foundation
import Larder
import Synchronization

/// Image variants of stored files: thumbnails and format conversions made with libvips, cached
/// as derived files keyed by the source's SHA-256 and the canonical parameters.
///
/// ```swift
/// let images = ImageVariants(larder: larder)
/// let thumb = try images.variant(of: photo, width: 200, height: 200, resize: .cover, format: .webp)
/// // `thumb` is a File: attach it to a model, or serve it.
/// ```
/// A variant is readable exactly when its source is: the server serves it only on a download
/// of the source that the rules allow; gc removes it when the source's last file goes.
public struct ImageVariants: Sendable {
  public struct Limits: Sendable {
    /// Sources whose header says more pixels than this are refused before decoding.
    public var maxPixels: Int64 = 50_000_000
    /// Sources larger than this are refused before reading.
    public var maxSourceBytes: Int64 = 25 << 20
    /// The largest `width` or `height` a request may ask for.
    public var maxDimension: Int = 2500
    /// The bytes of variants kept at most (the least recently used go past it, their blobs at
    /// once); 0 keeps none (each is rendered when asked); nil: no bound. A variant larger than
    /// the budget is rendered and served but not kept.
    public var cacheBytes: Int64?
    /// Variants kept per source at most: one more releases that source's least recently used.
    /// Nil: no bound but `cacheBytes`.
    public var variantsPerSource: Int?
    /// When set, the only widths and heights rendered: a request's width and height each snap
    /// to the nearest (the larger on a tie), so the variants of a source are a known set.
    public var sizes: [Int]?

    public static let defaultCacheBytes: Int64 = 1 << 30
    public static let defaultVariantsPerSource = 32

    public init(
      maxPixels: Int64 = 50_000_000, maxSourceBytes: Int64 = 25 << 20, maxDimension: Int = 2500,
      cacheBytes: Int64? = defaultCacheBytes, variantsPerSource: Int? = defaultVariantsPerSource,
      sizes: [Int]? = nil
    ) {
      self.maxPixels = maxPixels
      self.maxSourceBytes = maxSourceBytes
      self.maxDimension = maxDimension
      self.cacheBytes = cacheBytes
      self.variantsPerSource = variantsPerSource
      self.sizes = sizes.map { Array(Set($0)).sorted() }
    }

    /// `transform` with its width and height snapped to ``sizes``.
    public func snapped(_ transform: ImageTransform) -> ImageTransform {
      guard let sizes, !sizes.isEmpty else { return transform }
      func snap(_ value: Int?) -> Int? {
        value.map { v in sizes.min { (abs($0 - v), -$0) < (abs($1 - v), -$1) }! }
      }
      var t = transform
      t.width = snap(t.width)
      t.height = snap(t.height)
      return t
    }
  }

  /// A variant as made for one request: kept in the cache (a stored file), or too large for
  /// the cache's budget and only rendered (its bytes, to serve once).
  public enum Rendition: Sendable {
    case kept(File)
    case transient([UInt8])
  }

  public let larder: Larder
  public let limits: Limits
  public let pool: RenderPool
  private let alpha = SourceAlpha()

  public init(larder: Larder, limits: Limits = .init(), pool: RenderPool = .shared) {
    self.larder = larder
    self.limits = limits
    self.pool = pool
  }

  /// A variant of `file`, from the cache or rendered now (on the pool, once for concurrent callers).
  /// A variant that the cache's budget cannot hold is returned as a file that nothing holds
  /// (attach it, or gc removes it).
  /// - Throws: ``ImageError`` (parameters, not an image, limits, decode failure, busy), or the store's errors.
  public func variant(
    of file: File, width: Int? = nil, height: Int? = nil, resize: ImageTransform.Resize = .cover,
    format: ImageFormat? = nil, quality: Int = ImageTransform.defaultQuality
  ) throws -> File {
    for case (let name, let value?) in [("width", width), ("height", height)] {
      _ = try ImageTransform.checkDimension(name, value, max: limits.maxDimension, shown: String(value))
    }
    _ = try ImageTransform.checkQuality(quality, shown: String(quality))
    let transform = ImageTransform(
      width: width, height: height, resize: resize, format: format.map { .fixed($0) } ?? .origin,
      quality: quality)
    return try variant(of: file, transform: transform, format: outputFormat(transform, of: file, accept: nil))
  }

  /// The variant of `file` that `transform` asks for, encoded as `format`, as a file (see
  /// ``variant(of:width:height:resize:format:quality:)``).
  public func variant(of file: File, transform: ImageTransform, format: ImageFormat) throws -> File {
    switch try rendition(of: file, transform: transform, format: format) {
    case .kept(let kept): return kept
    case .transient(let bytes):
      return try larder.files.put(
        Data(bytes), filename: file.filename, declaredContentType: format.contentType)
    }
  }

  /// The format a request for `transform` of `file` gets (``ImageTransform/outputFormat(sourceType:accept:sourceHasAlpha:)``),
  /// reading the source's header when the answer depends on its alpha (remembered per content).
  /// - Throws: ``ImageError`` when the source cannot be transformed or its header read.
  public func outputFormat(_ transform: ImageTransform, of file: File, accept: String?) throws -> ImageFormat
  {
    try transform.outputFormat(sourceType: file.contentType, accept: accept) {
      if let known = alpha.value(file.sha256) { return known }
      let header = try Self.header(of: try source(file))
      alpha.keep(header.hasAlpha, for: file.sha256)
      return header.hasAlpha
    }
  }

  /// The variant of `file` that `transform` (its sizes snapped to ``Limits/sizes``) asks for,
  /// encoded as `format`: from the cache, or rendered now on the pool for `client` (its fair
  /// share: ``RenderPool``), then kept within the cache's budget (``DerivedFiles/Budget``).
  /// - Throws: ``ImageError`` (parameters, not an image, limits, decode failure, busy), or the store's errors.
  public func rendition(of file: File, transform: ImageTransform, format: ImageFormat, client: String? = nil)
    throws -> Rendition
  {
    let transform = limits.snapped(transform)
    let params = transform.canonical(format: format)
    try checkSource(file)
    if let cached = try larder.derived.find(source: file.sha256, params: params) { return .kept(cached) }
    let (larder, limits) = (self.larder, self.limits)
    let source: @Sendable () throws -> [UInt8] = { [self] in try self.source(file) }
    return try pool.run(key: "\(file.sha256);\(params)", client: client) { () throws -> Rendition in
      // Another node or an earlier flight may have made it since the look-up.
      if let cached = try larder.derived.find(source: file.sha256, params: params) { return .kept(cached) }
      let bytes = try Self.render(
        try source(), transform: transform, format: format, maxPixels: limits.maxPixels)
      if let budget = limits.cacheBytes, Int64(bytes.count) > budget { return .transient(bytes) }
      let made = try larder.files.put(
        Data(bytes), filename: file.filename, declaredContentType: format.contentType)
      // Nil: the source went meanwhile; the new file is left to gc, and served this once.
      let kept = try larder.derived.record(
        made, source: file.sha256, params: params,
        budget: .init(bytes: limits.cacheBytes, perSource: limits.variantsPerSource))
      return .kept(kept ?? made)
    }
  }

  private func checkSource(_ file: File) throws(ImageError) {
    guard ImageFormat.isTransformable(sourceType: file.contentType) else {
      throw ImageError.notAnImage(detectedType: file.contentType)
    }
    guard file.size <= limits.maxSourceBytes else {
      throw ImageError.sourceTooLarge(size: file.size, limit: limits.maxSourceBytes)
    }
  }

  /// The source's bytes, after the checks that need none of them.
  private func source(_ file: File) throws -> [UInt8] {
    try checkSource(file)
    return [UInt8](try larder.files.data(of: file, maxSize: limits.maxSourceBytes))
  }

  private static func header(of source: [UInt8]) throws(ImageError) -> Vips.Header {
    do { return try Vips.header(of: source) } catch { throw .decodeFailed(error.message) }
  }

  /// Encoded bytes of `source` transformed: the header is checked against `maxPixels` first.
  /// The result carries none of the source's metadata (EXIF, XMP, IPTC, profile): its
  /// orientation is in the pixels, its colour in sRGB.
  /// - Throws: ``ImageError/tooManyPixels(width:height:limit:)``, ``ImageError/decodeFailed(_:)``.
  public static func render(
    _ source: [UInt8], transform: ImageTransform, format: ImageFormat, maxPixels: Int64
  )
    throws(ImageError) -> [UInt8]
  {
    let header = try header(of: source)
    guard header.pixels <= maxPixels else {
      throw .tooManyPixels(width: header.width, height: header.height, limit: maxPixels)
    }
    let box = transform.box(source: header)
    do {
      let image = try Vips.thumbnail(
        source, width: box.width, height: box.height, crop: box.crop, force: box.force)
      return try image.encoded(as: format, quality: transform.quality)
    } catch {
      throw .decodeFailed(error.message)
    }
  }
}

/// Whether sources have alpha, by content (SHA-256): asked when a format depends on it, on
/// every such request; at most ``capacity`` remembered, emptied when full.
final class SourceAlpha: Sendable {
  static let capacity = 4096
  private let known = Mutex<[String: Bool]>([:])

  func value(_ sha256: String) -> Bool? { known.withLock { $0[sha256] } }

  func keep(_ value: Bool, for sha256: String) {
    known.withLock { known in
      if known.count >= Self.capacity { known.removeAll(keepingCapacity: true) }
      known[sha256] = value
    }
  }
}
