import Foundation
import Synchronization

/// An HTTP request as the layer hands it to a handler: the head only; the body streams
/// separately into an `HTTPBodySink`.
///
/// `path` is the raw, still percent-encoded path, because Firebase-style names travel
/// encoded in one segment (`/o/users%2Fu1`): decoding first would lose the segment
/// boundaries. Query items are decoded strictly at construction.
public struct HTTPRequest: Sendable {
  public let method: String
  /// The request target exactly as sent (path and query).
  public let target: String
  /// The raw path, not decoded (`/v0/b/app/o/users%2Fu1`).
  public let path: Substring
  /// The raw query string without `?`, or `nil` when the target had no `?`.
  public let rawQuery: Substring?
  public private(set) var query: [HTTPQueryItem]
  public let headers: HTTPHeaders
  /// The peer's IP address (`127.0.0.1`, `::1`), or `""` when unknown.
  public let remoteAddress: String
  /// The incoming `X-Request-Id` (or the `id` passed to `init`) when it is a short plain
  /// token, else 32 random hex digits; echoed on the response.
  public let id: String
  /// The declared `Content-Length`; `nil` when absent (no body, or chunked).
  public private(set) var contentLength: Int64?
  /// `HTTP/1.1` or `HTTP/1.0`.
  public let version: String

  /// Parses `target` strictly.
  /// - Throws: `HTTPRequestError.malformedTarget`, `.malformedPercentEncoding`, `.invalidUTF8`,
  ///   `.invalidContentLength`.
  public init(
    method: String, target: String, headers: HTTPHeaders = [:], remoteAddress: String = "",
    id: String? = nil, version: String = "HTTP/1.1"
  ) throws(HTTPRequestError) {
    self.init(
      unvalidated: method, target: target, headers: headers, remoteAddress: remoteAddress, id: id,
      version: version)
    guard target.utf8.first == 0x2F, target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
      throw .malformedTarget
    }
    if let raw = rawQuery { query = try HTTPQueryItem.parse(raw) }
    if let declared = headers["Content-Length"] {
      guard let value = Int64(declared), value >= 0, declared.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
      else {
        throw .invalidContentLength
      }
      contentLength = value
    }
  }

  /// A request whose query was not parsed: what the layer passes to `errorResponse` when parsing failed.
  init(
    unvalidated method: String, target: String, headers: HTTPHeaders, remoteAddress: String, id: String?,
    version: String
  ) {
    self.method = method
    self.target = target
    // Searched as bytes: a Character search walks grapheme clusters, a measurable cost on every
    // request. For the ASCII targets every valid request has, the two find the same `?`.
    let question =
      target.utf8.allSatisfy({ $0 < 0x80 })
      ? target.utf8.firstIndex(of: 0x3F).map { ($0, target.utf8.index(after: $0)) }
      : target.firstIndex(of: "?").map { ($0, target.index(after: $0)) }
    if let (q, afterQ) = question {
      path = target[..<q]
      rawQuery = target[afterQ...]
    } else {
      path = target[...]
      rawQuery = nil
    }
    query = []
    self.headers = headers
    self.remoteAddress = remoteAddress
    self.id =
      (id ?? headers["X-Request-Id"]).flatMap { Self.isSaneRequestID($0) ? $0 : nil } ?? Self.randomID()
    contentLength = nil
    self.version = version
  }

  /// The first decoded value of query parameter `name`; `""` for `?name` or `?name=`.
  public func queryValue(_ name: String) -> String? {
    guard let item = query.first(where: { $0.name == name }) else { return nil }
    return item.value ?? ""
  }

  /// The raw path split on `/`, the leading empty segment dropped (`/a/b%2Fc` → `["a", "b%2Fc"]`).
  public var rawPathSegments: [Substring] {
    (path.splitASCII(on: 0x2F, omittingEmpty: false)
      ?? path.split(separator: "/", omittingEmptySubsequences: false)).dropFirst().map { $0 }
  }

  /// Client-supplied ids are echoed into logs and headers, so only short, plain tokens are kept.
  static func isSaneRequestID(_ s: String) -> Bool {
    let u = s.utf8
    return (1...128).contains(u.count)
      && u.allSatisfy { c in
        (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c)
          || c == 0x2D || c == 0x5F || c == 0x2E || c == 0x3A
      }
  }

  /// 128 random bits as 32 hex digits, from the system CSPRNG (`arc4random_buf`, which is
  /// `getrandom` on Linux), so ids are unguessable without a crypto module here. The bits are
  /// drawn 512 bytes at a time: one system call per 32 ids, where two per id were a measurable
  /// share of a small download's CPU.
  static func randomID() -> String {
    let (high, low) = idEntropy.withLock { pool -> (UInt64, UInt64) in
      if pool.used + 16 > RandomPool.size {
        pool.bytes.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
        pool.used = 0
      }
      defer { pool.used += 16 }
      return pool.bytes.withUnsafeBytes {
        ($0.loadUnaligned(fromByteOffset: pool.used, as: UInt64.self),
         $0.loadUnaligned(fromByteOffset: pool.used + 8, as: UInt64.self))
      }
    }
    return String(unsafeUninitializedCapacity: 32) { out in
      let digits: StaticString = "0123456789abcdef"
      func put(_ value: UInt64, at offset: Int) {
        for i in 0..<16 { out[offset + i] = digits.utf8Start[Int((value >> UInt64(60 - 4 * i)) & 0xF)] }
      }
      put(high, at: 0)
      put(low, at: 16)
      return 32
    }
  }

  private struct RandomPool {
    static let size = 512
    var bytes = [UInt8](repeating: 0, count: size)
    var used = size
  }
  private static let idEntropy = Mutex(RandomPool())
}
