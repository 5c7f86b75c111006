import Foundation
import Larder

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
    /// When set, the least recently used variants are released once their bytes exceed it.
    public var cacheBytes: Int64?
    public init(
      maxPixels: Int64 = 50_000_000, maxSourceBytes: Int64 = 25 << 20, maxDimension: Int = 2500,
      cacheBytes: Int64? = nil
    ) {
      self.maxPixels = maxPixels
      self.maxSourceBytes = maxSourceBytes
      self.maxDimension = maxDimension
      self.cacheBytes = cacheBytes
    }
  }

  public let larder: Larder
  public let limits: Limits
  public let pool: RenderPool

  public init(larder: Larder, limits: Limits = .init(), pool: RenderPool = .shared) {
    self.larder = larder
    self.limits = limits
    self.pool = pool
  }

  /// A variant of `file`, from the cache or rendered now (on the pool, once for concurrent callers).
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
    return try variant(
      of: file, transform: transform,
      format: transform.outputFormat(sourceType: file.contentType, accept: nil))
  }

  /// The variant of `file` that `transform` asks for, encoded as `format`.
  public func variant(of file: File, transform: ImageTransform, format: ImageFormat) throws -> File {
    guard ImageFormat.isTransformable(sourceType: file.contentType) else {
      throw ImageError.notAnImage(detectedType: file.contentType)
    }
    guard file.size <= limits.maxSourceBytes else {
      throw ImageError.sourceTooLarge(size: file.size, limit: limits.maxSourceBytes)
    }
    let params = transform.canonical(format: format)
    if let cached = try larder.derived.find(source: file.sha256, params: params) { return cached }
    let (larder, limits) = (self.larder, self.limits)
    return try pool.run(key: "\(file.sha256);\(params)") {
      // Another node or an earlier flight may have made it since the look-up.
      if let cached = try larder.derived.find(source: file.sha256, params: params) { return cached }
      let bytes = try Self.render(
        [UInt8](try larder.files.data(of: file, maxSize: limits.maxSourceBytes)), transform: transform,
        format: format, maxPixels: limits.maxPixels)
      let made = try larder.files.put(
        Data(bytes), filename: file.filename, declaredContentType: format.contentType)
      // Nil: the source went meanwhile; the new file is left to gc, and served this once.
      let kept = try larder.derived.record(made, source: file.sha256, params: params) ?? made
      if let budget = limits.cacheBytes { try larder.derived.evict(toFit: budget) }
      return kept
    }
  }

  /// Encoded bytes of `source` transformed: the header is checked against `maxPixels` first.
  /// - Throws: ``ImageError/tooManyPixels(width:height:limit:)``, ``ImageError/decodeFailed(_:)``.
  public static func render(
    _ source: [UInt8], transform: ImageTransform, format: ImageFormat, maxPixels: Int64
  )
    throws(ImageError) -> [UInt8]
  {
    let header: Vips.Header
    do { header = try Vips.header(of: source) } catch { throw .decodeFailed(error.message) }
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
