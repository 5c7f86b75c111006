import Foundation
import Synchronization

/// One line of the access log.
public struct AccessLogEntry: Sendable, Equatable {
  /// Seconds since 1970 when the request line arrived.
  public var time: Double
  public var requestID: String
  public var method: String
  /// The raw request path (not decoded, no query: queries may carry tokens).
  public var path: String
  public var route: String
  /// 0 when no response was sent.
  public var status: Int
  public var bytesIn: Int64
  public var bytesOut: Int64
  public var durationMilliseconds: Double
  public var remote: String
  /// `ok`, or why the request ended early: `error`, `timeout`, `shutdown`, `read_error`, `client_abort`.
  public var outcome: String

  public init(
    time: Double, requestID: String, method: String, path: String, route: String, status: Int, bytesIn: Int64,
    bytesOut: Int64, durationMilliseconds: Double, remote: String, outcome: String
  ) {
    self.time = time
    self.requestID = requestID
    self.method = method
    self.path = path
    self.route = route
    self.status = status
    self.bytesIn = bytesIn
    self.bytesOut = bytesOut
    self.durationMilliseconds = durationMilliseconds
    self.remote = remote
    self.outcome = outcome
  }

  /// The JSON line, without the newline. Keys are fixed so log tooling can rely on them.
  public var json: String {
    var s = "{\"time\":\"\(Self.iso8601(time))\",\"request_id\":"
    s += Self.quote(requestID)
    s += ",\"method\":" + Self.quote(method)
    s += ",\"path\":" + Self.quote(path)
    s += ",\"route\":" + Self.quote(route)
    s += ",\"status\":\(status),\"bytes_in\":\(bytesIn),\"bytes_out\":\(bytesOut)"
    s += ",\"duration_ms\":" + String(format: "%.3f", durationMilliseconds)
    s += ",\"remote\":" + Self.quote(remote)
    s += ",\"outcome\":" + Self.quote(outcome) + "}"
    return s
  }

  static func quote(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      case _ where scalar.value < 0x20 || scalar.value == 0x7F:
        out += String(format: "\\u%04x", scalar.value)
      default: out.unicodeScalars.append(scalar)
      }
    }
    return out + "\""
  }

  static func iso8601(_ time: Double) -> String {
    var seconds = time_t(time.rounded(.down))
    let millis = Int((time - Double(seconds)) * 1000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    return String(
      format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), min(millis, 999))
  }
}

/// Writes one JSON line per request.
///
/// Each line goes out in a single `write(2)` on an `O_APPEND` descriptor so lines from
/// concurrent server threads never interleave.
public final class AccessLog: Sendable {
  public enum Destination: Sendable {
    case standardError
    /// Appends to the file, creating it (0640).
    case file(String)
    case disabled
    /// Receives each line (without newline); for tests and custom shipping.
    case custom(@Sendable (String) -> Void)
  }

  private enum Sink: Sendable {
    case descriptor(Int32, owned: Bool)
    case closure(@Sendable (String) -> Void)
    case none
  }

  private let sink: Sink

  /// - Throws: `HTTPServerError.accessLog` when the file cannot be opened.
  public init(_ destination: Destination) throws(HTTPServerError) {
    switch destination {
    case .standardError: sink = .descriptor(STDERR_FILENO, owned: false)
    case .disabled: sink = .none
    case .custom(let f): sink = .closure(f)
    case .file(let path):
      let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
      guard fd >= 0 else { throw .accessLog(path: path, errno: errno) }
      sink = .descriptor(fd, owned: true)
    }
  }

  public var isEnabled: Bool {
    if case .none = sink { return false }
    return true
  }

  public func record(_ entry: AccessLogEntry) {
    switch sink {
    case .none: return
    case .closure(let f): f(entry.json)
    case .descriptor(let fd, _):
      var line = entry.json
      line += "\n"
      line.withUTF8 { buffer in _ = write(fd, buffer.baseAddress, buffer.count) }
    }
  }

  deinit {
    if case .descriptor(let fd, true) = sink { close(fd) }
  }
}
