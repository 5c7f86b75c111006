import Foundation
import Synchronization

/// An HTTP response: status, ordered headers and a body.
///
/// `Content-Length` is computed by the layer from the body and must not be set by hand;
/// `X-Request-Id` is added to every response.
/// ```swift
/// HTTPResponse.json(status: 200, metadata)
/// HTTPResponse(status: 200, headers: ["Content-Type": "image/png"], body: .file(HTTPFileBody(fd, offset: 0, length: size)))
/// ```
public struct HTTPResponse: Sendable {
  public enum Body: Sendable {
    case empty
    case bytes([UInt8])
    /// Sent with `sendfile` (zero-copy); the `HTTPFileBody` owns the descriptor.
    case file(HTTPFileBody)
    /// Produced while it is sent, from a pipe (see ``HTTPStreamBody``).
    case stream(HTTPStreamBody)
    /// Only for `HEAD`: announces `Content-Length: n` without content. Answering a
    /// non-HEAD request with it aborts the connection after the headers.
    case lengthOnly(Int64)

    /// The number of content bytes this body announces.
    public var length: Int64 {
      switch self {
      case .empty: 0
      case .bytes(let b): Int64(b.count)
      case .file(let f): f.length
      case .stream(let s): s.length
      case .lengthOnly(let n): n
      }
    }
  }

  public var status: Int
  public var headers: HTTPHeaders
  public var body: Body

  public init(status: Int = 200, headers: HTTPHeaders = [:], body: Body = .empty) {
    self.status = status
    self.headers = headers
    self.body = body
  }

  /// A `text/plain; charset=utf-8` response.
  public static func text(_ text: String, status: Int = 200) -> HTTPResponse {
    HTTPResponse(
      status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: .bytes(Array(text.utf8)))
  }

  /// An `application/json` response of `value`, keys sorted so bodies are stable.
  /// A JSON document already written (by an encoder of the caller's).
  public static func json(status: Int = 200, encoded: [UInt8]) -> HTTPResponse {
    HTTPResponse(status: status, headers: ["Content-Type": "application/json; charset=utf-8"], body: .bytes(encoded))
  }

  public static func json<T: Encodable>(status: Int = 200, _ value: T) -> HTTPResponse {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    do {
      return .json(status: status, encoded: Array(try encoder.encode(value)))
    } catch {
      return .error(status: 500, message: "response encoding failed")
    }
  }

  /// Firebase's error shape: `{"error": {"code": 404, "status": "NOT_FOUND", "message": "..."}}`.
  public static func error(status: Int, message: String, extra: [String: Int64] = [:]) -> HTTPResponse {
    struct Envelope: Encodable {
      struct Inner: Encodable {
        let code: Int
        let status: String
        let message: String
        let extra: [String: Int64]
        enum Key: CodingKey {
          case custom(String)
          var stringValue: String { if case .custom(let s) = self { s } else { "" } }
          init?(stringValue: String) { self = .custom(stringValue) }
          var intValue: Int? { nil }
          init?(intValue: Int) { nil }
        }
        func encode(to encoder: any Encoder) throws {
          var c = encoder.container(keyedBy: Key.self)
          try c.encode(code, forKey: .custom("code"))
          try c.encode(status, forKey: .custom("status"))
          try c.encode(message, forKey: .custom("message"))
          for (k, v) in extra { try c.encode(v, forKey: .custom(k)) }
        }
      }
      let error: Inner
    }
    return .json(
      status: status,
      Envelope(error: .init(code: status, status: statusName(status), message: message, extra: extra)))
  }

  /// The google.rpc-style status name Firebase clients switch on.
  public static func statusName(_ status: Int) -> String {
    switch status {
    case 400, 411, 416: "INVALID_ARGUMENT"
    case 401: "UNAUTHENTICATED"
    case 403: "PERMISSION_DENIED"
    case 404: "NOT_FOUND"
    case 405: "METHOD_NOT_ALLOWED"
    case 409: "ALREADY_EXISTS"
    case 412: "FAILED_PRECONDITION"
    case 413, 414, 431: "OUT_OF_RANGE"
    case 429: "RESOURCE_EXHAUSTED"
    case 501, 505: "UNIMPLEMENTED"
    case 503: "UNAVAILABLE"
    case 507: "RESOURCE_EXHAUSTED"
    case 500...: "INTERNAL"
    default: "UNKNOWN"
    }
  }
}

/// A file region to send with `sendfile`, owning its descriptor.
///
/// Ownership is explicit because the descriptor outlives the handler: the layer hands it
/// to the engine (which closes it once the body is sent or the connection ends) or, when the response
/// is never sent (client gone), this object closes it in `deinit`. Never close the
/// descriptor yourself after passing it here.
public final class HTTPFileBody: Sendable {
  public let offset: Int64
  public let length: Int64
  private let descriptor: HandedOverDescriptor

  /// Takes ownership of `fd` (opened read-only, blocking).
  public init(takingOwnershipOf fd: Int32, offset: Int64 = 0, length: Int64) {
    precondition(offset >= 0 && length >= 0, "negative file region")
    self.offset = offset
    self.length = length
    descriptor = HandedOverDescriptor(fd)
  }

  /// Hands the descriptor over (to the engine, or a test driver that reads it); afterwards
  /// this object no longer closes it. Nil when it was taken already.
  public func take() -> Int32? { descriptor.take() }
}
