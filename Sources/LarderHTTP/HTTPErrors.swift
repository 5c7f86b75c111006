import Foundation

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
  /// More than one `Content-Length` value (repeated, or a list) that a proxy and Larder could
  /// read differently (RFC 9112 §6.3, the request-smuggling class).
  case conflictingContentLength
  /// `Content-Length` together with `Transfer-Encoding` (RFC 9112 §6.1: the server must close).
  case contentLengthWithTransferEncoding
  /// A `Transfer-Encoding` other than exactly `chunked` (gzip, a list, …): 501, RFC 9112 §6.1.
  case unsupportedTransferEncoding(String)
  /// An HTTP/1.1 request without `Host` (RFC 9112 §3.2).
  case missingHost
  /// A request head RFC 9112 does not allow: a bare CR or LF, obs-fold, whitespace before a
  /// field's colon, a control character, a malformed request line.
  case malformedHead(String)
  /// A request line longer than the server reads (414).
  case targetTooLong(limit: Int)
  /// An HTTP version other than 1.0 and 1.1 (505).
  case unsupportedVersion
  /// A chunked body whose framing is broken: a size that is not hex or too large, a missing CRLF.
  case invalidChunk(String)
  /// A chunk extension longer than the server reads (413).
  case chunkExtensionTooLong(limit: Int)

  public var code: String {
    switch self {
    case .malformedPercentEncoding: "malformed_percent_encoding"
    case .invalidUTF8: "invalid_utf8"
    case .malformedTarget: "malformed_target"
    case .headersTooLarge: "headers_too_large"
    case .bodyTooLarge: "body_too_large"
    case .invalidContentLength: "invalid_content_length"
    case .conflictingContentLength: "conflicting_content_length"
    case .contentLengthWithTransferEncoding: "content_length_with_transfer_encoding"
    case .unsupportedTransferEncoding: "unsupported_transfer_encoding"
    case .missingHost: "missing_host"
    case .malformedHead: "malformed_head"
    case .targetTooLong: "target_too_long"
    case .unsupportedVersion: "unsupported_version"
    case .invalidChunk: "invalid_chunk"
    case .chunkExtensionTooLong: "chunk_extension_too_long"
    }
  }

  public var status: Int {
    switch self {
    case .malformedPercentEncoding, .invalidUTF8, .malformedTarget, .invalidContentLength,
      .conflictingContentLength, .contentLengthWithTransferEncoding, .missingHost, .malformedHead, .invalidChunk:
      400
    case .unsupportedTransferEncoding: 501
    case .headersTooLarge: 431
    case .bodyTooLarge, .chunkExtensionTooLong: 413
    case .targetTooLong: 414
    case .unsupportedVersion: 505
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
    case .conflictingContentLength: "conflicting Content-Length values"
    case .contentLengthWithTransferEncoding: "Content-Length together with Transfer-Encoding"
    case .unsupportedTransferEncoding(let s):
      "unsupported Transfer-Encoding \(s.prefix(100).debugDescription)"
    case .missingHost: "an HTTP/1.1 request needs a Host header"
    case .malformedHead(let why): "malformed request head: \(why)"
    case .targetTooLong(let limit): "request line exceeds \(limit) bytes"
    case .unsupportedVersion: "only HTTP/1.0 and HTTP/1.1 are supported"
    case .invalidChunk(let why): "malformed chunked body: \(why)"
    case .chunkExtensionTooLong(let limit): "chunk extension exceeds \(limit) bytes"
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
public enum HTTPServerError: Error, Sendable, Equatable, CustomStringConvertible {
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

  /// One line for an operator: `cannot bind 127.0.0.1:8080: the port is in use (another larder serve?)`.
  public var description: String {
    switch self {
    case .invalidHost(let host): "cannot listen on '\(host)': not an IP address and port"
    case .socket(let operation, let code) where code == EADDRINUSE:
      "cannot \(operation): the port is in use (another larder serve?)"
    case .socket(let operation, let code): "cannot \(operation): \(String(cString: strerror(code)))"
    case .accessLog(let path, let code): "cannot open the access log \(path): \(String(cString: strerror(code)))"
    case .daemonStartFailed: "the HTTP daemon did not start"
    case .alreadyStarted: "the server is already started"
    }
  }
}
