import Foundation
import Larder
import LarderCrypto
import LarderHTTP
import LarderImages
import Synchronization

/// Image options of the service: the limits, and the render pool's size.
public struct ImageOptions: Sendable {
  public var limits = ImageVariants.Limits()
  /// Threads rendering at once.
  public var renderThreads = max(1, ProcessInfo.processInfo.activeProcessorCount)
  /// Renders waiting beyond those; one more is refused with 503 and `Retry-After`.
  public var renderQueue = 32
  /// Renders one client (an identity, or an address) may have queued or running; one more is
  /// refused with 429 and `Retry-After`. Nil: ``defaultRendersPerClient(requestThreads:)``.
  public var rendersPerClient: Int?
  public init() {}

  /// Half the request threads (a render holds one while it waits), at least 1 and at most 4:
  /// one client's renders never hold every request thread, so others' requests are served.
  public static func defaultRendersPerClient(requestThreads: Int) -> Int {
    max(1, min(4, requestThreads / 2))
  }
}

/// A download that asks for an image variant (`width`, `height`, `resize`, `format`, `quality`):
/// the object served is the variant, under the source's name and access (it is asked for on the
/// source's URL, after the source's rules or token allowed the read).
enum ImageVariantDownload {
  struct Variant: Sendable {
    var object: StoredObject
    /// The format came from `Accept`: the answer carries `Vary: Accept`.
    var negotiated: Bool
    /// The head of `object`, when it came from a row's memo.
    var head: ObjectsEndpoint.DownloadHead?
    /// The bytes of a variant rendered and not kept (larger than the cache's budget).
    var inline: [UInt8]?
  }

  /// The variant the request asks of `object`, nil when it asks for none.
  ///
  /// `memo`, the cached row's (``ObjectMemo``), remembers the variants found for it with their
  /// heads, so a hot thumbnail costs what a hot download does: no `derived_files` read, no head
  /// made. Any commit to the catalog (a render recorded; gc or the LRU budget releasing a
  /// variant, in this process or another) drops the memo with the row, so nothing released is
  /// served from it; a variant is found again every ``DerivedFiles/touchInterval`` so that its LRU
  /// order still moves. Only for a caller that serves the variant's row as it is.
  /// - Throws: ``ImageError`` (the status is APIError's), or the store's errors.
  static func variant(
    of object: StoredObject, _ request: HTTPRequest, identity: Identity?, context: ServiceContext,
    memo: ObjectMemo?
  ) throws -> Variant? {
    guard let images = context.images else {
      // Turned off: a request for a variant is refused rather than answered with the original.
      if ImageTransform.parameterNames.contains(where: { request.queryValue($0) != nil }) {
        throw ImageError.disabled
      }
      return nil
    }
    guard
      let asked = try ImageTransform(
        query: { request.queryValue($0) }, maxDimension: images.limits.maxDimension)
    else { return nil }
    let transform = images.limits.snapped(asked)
    let format = try images.outputFormat(transform, of: object.file, accept: request.headers["Accept"])
    let remembered = memo?.value { Remembered() }
    let params = transform.canonical(format: format)
    if let known = remembered?.variant(params: params) { return known }
    // Who the render pool shares itself between: the identity, else the address.
    let client = identity.map { "uid:\($0.uid)" } ?? "ip:\(request.remoteAddress)"
    var inline: [UInt8]?
    let file = try context.chargingRender(request, source: object.file, params: params) { () throws -> File in
      switch try images.rendition(of: object.file, transform: transform, format: format, client: client) {
      case .kept(let file): return file
      case .transient(let bytes):
        inline = bytes
        // Stored nowhere: no new file was made (dated accordingly), the bytes are served from memory.
        return File(
          id: "", sha256: Hex.encode(Digest.hash(.sha256, bytes)), size: Int64(bytes.count),
          md5: Hex.encode(Digest.hash(.md5, bytes)), contentType: format.contentType, declaredContentType: nil,
          filename: object.file.filename, createdAt: .distantPast, crc32c: CRC32C.checksum(bytes))
      }
    }
    var served = object
    served.file = file
    served.contentType = format.contentType
    served.contentEncoding = nil
    if let inline { return Variant(object: served, negotiated: transform.format == nil, inline: inline) }
    var variant = Variant(object: served, negotiated: transform.format == nil)
    if let remembered {
      variant.head = ObjectsEndpoint.DownloadHead(served)
      remembered.keep(variant, params: params)
    }
    return variant
  }

  /// The variants found for one cached row, by their canonical parameters, and when; at most
  /// ``capacity``, emptied when full (as ``ObjectMemo``'s cache is): requests for ever other
  /// sizes of one hot source cannot grow it without bound.
  final class Remembered: Sendable {
    static let capacity = 64
    private let found = Mutex<[String: (variant: Variant, at: ContinuousClock.Instant)]>([:])

    func variant(params: String) -> Variant? {
      guard let entry = found.withLock({ $0[params] }) else { return nil }
      return ContinuousClock.now - entry.at < .seconds(DerivedFiles.touchInterval) ? entry.variant : nil
    }

    func keep(_ variant: Variant, params: String) {
      found.withLock { found in
        if found.count >= Self.capacity { found.removeAll(keepingCapacity: true) }
        found[params] = (variant, .now)
      }
    }

    /// Variants held now (for tests).
    var count: Int { found.withLock { $0.count } }
  }
}
