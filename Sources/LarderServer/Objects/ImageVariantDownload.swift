import Foundation
import Larder
import LarderHTTP
import LarderImages

/// Image options of the service: the limits, and the render pool's size.
public struct ImageOptions: Sendable {
  public var limits = ImageVariants.Limits()
  /// Threads rendering at once.
  public var renderThreads = max(1, ProcessInfo.processInfo.activeProcessorCount)
  /// Renders waiting beyond those; one more is refused with 503 and `Retry-After`.
  public var renderQueue = 32
  public init() {}
}

/// A download that asks for an image variant (`width`, `height`, `resize`, `format`, `quality`):
/// the object served is the variant, under the source's name and access (it is asked for on the
/// source's URL, after the source's rules or token allowed the read).
enum ImageVariantDownload {
  struct Variant {
    var object: StoredObject
    /// The format came from `Accept`: the answer carries `Vary: Accept`.
    var negotiated: Bool
  }

  /// The variant the request asks of `object`, nil when it asks for none.
  /// - Throws: ``ImageError`` (the status is APIError's), or the store's errors.
  static func variant(of object: StoredObject, _ request: HTTPRequest, context: ServiceContext) throws
    -> Variant?
  {
    guard let images = context.images else {
      // Turned off: a request for a variant is refused rather than answered with the original.
      if ImageTransform.parameterNames.contains(where: { request.queryValue($0) != nil }) {
        throw ImageError.disabled
      }
      return nil
    }
    guard
      let transform = try ImageTransform(
        query: { request.queryValue($0) }, maxDimension: images.limits.maxDimension)
    else { return nil }
    let format = transform.outputFormat(
      sourceType: object.file.contentType, accept: request.headers["Accept"])
    let file = try images.variant(of: object.file, transform: transform, format: format)
    var variant = object
    variant.file = file
    variant.contentType = format.contentType
    variant.contentEncoding = nil
    return Variant(object: variant, negotiated: transform.format == nil)
  }
}
