/// A request the HTTP layer could not accept before any handler ran.
///
/// Each case has a stable `code` (for logs and JSON bodies) and the HTTP status it maps to,
/// so the endpoint layer can turn it into its own error shape in one place.
public enum HTTPRequestError: Error, Sendable, Equatable {
  /// A `%` not followed by two hex digits, in the path or the query.
  case malformedPercentEncoding(String)
  /// Percent-decoded bytes that are not UTF-8.
  case invalidUTF8(String)
  /// A request target with bytes outside printable ASCII, or not starting with `/`.
  case malformedTarget
  /// The request header block is larger than `Configuration.maxHeaderBytes`.
  case headersTooLarge(limit: Int)
  /// The body is (or is declared) larger than `Configuration.maxBodyBytes`.
  case bodyTooLarge(limit: Int64)
  /// `Content-Length` is not a decimal number.
  case invalidContentLength

  public var code: String {
    switch self {
    case .malformedPercentEncoding: "malformed_percent_encoding"
    case .invalidUTF8: "invalid_utf8"
    case .malformedTarget: "malformed_target"
    case .headersTooLarge: "headers_too_large"
    case .bodyTooLarge: "body_too_large"
    case .invalidContentLength: "invalid_content_length"
    }
  }

  public var status: Int {
    switch self {
    case .malformedPercentEncoding, .invalidUTF8, .malformedTarget, .invalidContentLength: 400
    case .headersTooLarge: 431
    case .bodyTooLarge: 413
    }
  }

  public var message: String {
    switch self {
    case .malformedPercentEncoding(let s): "malformed percent-encoding in \(s.prefix(200).debugDescription)"
    case .invalidUTF8(let s): "percent-encoded bytes are not UTF-8 in \(s.prefix(200).debugDescription)"
    case .malformedTarget: "malformed request target"
    case .headersTooLarge(let limit): "request headers exceed \(limit) bytes"
    case .bodyTooLarge(let limit): "request body exceeds \(limit) bytes"
    case .invalidContentLength: "invalid Content-Length"
    }
  }
}

/// Thrown by a body sink (or any handler code) that has already decided the exact response.
///
/// ```swift
/// throw HTTPResponseError(.error(status: 413, message: "upload exceeds 5 GiB"))
/// ```
public struct HTTPResponseError: Error, Sendable {
  public var response: HTTPResponse
  public init(_ response: HTTPResponse) { self.response = response }
}

/// Failures of the server itself (binding, starting the daemon).
public enum HTTPServerError: Error, Sendable, Equatable {
  case invalidHost(String)
  case socket(operation: String, errno: Int32)
  /// The access-log file could not be opened.
  case accessLog(path: String, errno: Int32)
  case daemonStartFailed
  case alreadyStarted

  public var code: String {
    switch self {
    case .invalidHost: "invalid_host"
    case .socket: "socket_error"
    case .accessLog: "access_log_error"
    case .daemonStartFailed: "daemon_start_failed"
    case .alreadyStarted: "already_started"
    }
  }
}
