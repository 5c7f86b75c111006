import Foundation

/// The JSON error a Larder server answers with: `{"error": {"code", "status", "message", …}}`.
///
/// `status` is the google.rpc name Firebase clients switch on (`NOT_FOUND`,
/// `PERMISSION_DENIED`, `OUT_OF_RANGE`, …); `size` and `maxSize` are set on a capped
/// download's 413.
public struct LarderAPIError: Sendable, Equatable, CustomStringConvertible {
  /// The HTTP status code.
  public var code: Int
  public var status: String
  public var message: String
  public var size: Int64?
  public var maxSize: Int64?

  public init(code: Int, status: String, message: String, size: Int64? = nil, maxSize: Int64? = nil) {
    self.code = code
    self.status = status
    self.message = message
    self.size = size
    self.maxSize = maxSize
  }

  public var description: String { "\(code) \(status): \(message)" }

  /// Decodes the server's error body; an answer without one (a proxy's HTML page) keeps the
  /// HTTP status and a short excerpt of the body, so the caller still sees what happened.
  static func decode(status: Int, body: Data) -> LarderAPIError {
    struct Envelope: Decodable {
      struct Inner: Decodable {
        var code: Int?
        var status: String?
        var message: String?
        var size: Int64?
        var maxSize: Int64?
      }
      var error: Inner
    }
    if let e = try? JSONDecoder().decode(Envelope.self, from: body) {
      return LarderAPIError(
        code: e.error.code ?? status, status: e.error.status ?? "UNKNOWN", message: e.error.message ?? "",
        size: e.error.size, maxSize: e.error.maxSize)
    }
    let text = String(decoding: body.prefix(200), as: UTF8.self)
    return LarderAPIError(code: status, status: "UNKNOWN", message: text)
  }
}

/// Everything a `LarderClient` call can throw.
public enum LarderClientError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The server answered with an error (decoded from its JSON body).
  case server(LarderAPIError)
  /// A download (or range) is larger than the `maxSize` asked for: the server refused it
  /// before sending a byte of content (413 with `size` and `maxSize`).
  case tooLarge(size: Int64, maxSize: Int64)
  /// The request never got an HTTP answer (connection refused, reset, timed out, cancelled).
  case transport(String)
  /// The server's answer was not what the protocol says (missing header, undecodable JSON).
  case invalidResponse(String)
  /// The call's own arguments are unusable (a header-unsafe metadata value, an empty range).
  case invalidArgument(String)
  /// A local file could not be read.
  case file(String)
  /// The token provider failed.
  case authentication(String)

  /// The HTTP status of a server error (`tooLarge` is 413), `nil` for local failures.
  public var httpStatus: Int? {
    switch self {
    case .server(let e): e.code
    case .tooLarge: 413
    default: nil
    }
  }

  public var description: String {
    switch self {
    case .server(let e): "server error \(e)"
    case .tooLarge(let size, let maxSize): "the object is \(size) bytes, more than maxSize \(maxSize)"
    case .transport(let m): "transport error: \(m)"
    case .invalidResponse(let m): "invalid response: \(m)"
    case .invalidArgument(let m): "invalid argument: \(m)"
    case .file(let m): "file error: \(m)"
    case .authentication(let m): "token provider failed: \(m)"
    }
  }
}
