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
    s += ",\"duration_ms\":" + Self.printf("%.3f", durationMilliseconds)
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
    return printf(
      "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int32(parts.tm_year) + 1900, Int32(parts.tm_mon) + 1,
      parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, Int32(min(millis, 999)))
  }

  /// C's `snprintf` into a stack buffer: the same text as `String(format:)` for these plain
  /// conversions, without Foundation's formatter on every request.
  static func printf(_ format: String, _ arguments: any CVarArg...) -> String {
    withVaList(arguments) { list in
      withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
        let n = Int(vsnprintf(buffer.baseAddress, 64, format, list))
        guard n >= 0 else { return "" }
        return String(
          decoding: UnsafeRawBufferPointer(start: buffer.baseAddress, count: min(n, 63)), as: UTF8.self)
      }
    }
  }
}

/// Writes one JSON line per request.
///
/// To standard error each line goes out in a single `write(2)` on the request's thread, so it
/// keeps its place among the server's other messages. To a file, lines are appended to a buffer
/// and a writer thread of its own writes them about every 50 ms (or sooner once 64 KiB wait):
/// the connection threads never make the system call, and the file gets a few large appends
/// instead of one per request. Only whole lines are written, and ``flush()`` (called when the
/// server stops) writes what is left: a crash may lose the last 50 ms of lines, nothing else.
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
    case descriptor(Int32)
    case buffered(AccessLogWriter)
    case closure(@Sendable (String) -> Void)
    case none
  }

  private let sink: Sink

  /// - Throws: `HTTPServerError.accessLog` when the file cannot be opened.
  public init(_ destination: Destination) throws(HTTPServerError) {
    switch destination {
    case .standardError: sink = .descriptor(STDERR_FILENO)
    case .disabled: sink = .none
    case .custom(let f): sink = .closure(f)
    case .file(let path):
      let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
      guard fd >= 0 else { throw .accessLog(path: path, errno: errno) }
      sink = .buffered(AccessLogWriter(descriptor: fd))
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
    case .buffered(let writer): writer.append(entry.json)
    case .descriptor(let fd):
      var line = entry.json
      line += "\n"
      line.withUTF8 { buffer in _ = write(fd, buffer.baseAddress, buffer.count) }
    }
  }

  /// Writes every line recorded so far before returning.
  public func flush() {
    if case .buffered(let writer) = sink { writer.flush() }
  }

  deinit {
    if case .buffered(let writer) = sink { writer.stop() }
  }
}

/// The buffer and writer thread behind a file access log; closes the descriptor when stopped.
final class AccessLogWriter: @unchecked Sendable {
  /// A buffer this full wakes the writer at once.
  static let wakeBytes = 64 * 1024
  /// Beyond this the appending thread writes the buffer itself: a disk slower than the request
  /// rate slows requests down instead of growing memory without bound.
  static let maxBytes = 4 << 20
  static let interval = 0.05

  private let descriptor: Int32
  // NSCondition guards everything below (it is both the lock and the writer's wake-up).
  private let condition = NSCondition()
  private var pending: [UInt8] = []
  private var spare: [UInt8] = []
  private var stopping = false
  private var writing = false
  private let finished = DispatchSemaphore(value: 0)

  init(descriptor: Int32) {
    self.descriptor = descriptor
    pending.reserveCapacity(Self.wakeBytes * 2)
    let thread = Thread { [self] in run() }
    thread.name = "access-log"
    thread.start()
  }

  func append(_ line: String) {
    var line = line
    condition.lock()
    line.withUTF8 { pending.append(contentsOf: $0) }
    pending.append(0x0A)
    let count = pending.count
    if count >= Self.maxBytes {
      while writing { condition.wait() }
      writeOut()
    } else if count >= Self.wakeBytes {
      condition.signal()
    }
    condition.unlock()
  }

  func flush() {
    condition.lock()
    while writing { condition.wait() }
    writeOut()
    condition.unlock()
  }

  func stop() {
    condition.lock()
    stopping = true
    condition.broadcast()
    condition.unlock()
    finished.wait()
    close(descriptor)
  }

  private func run() {
    condition.lock()
    while true {
      if !stopping && pending.count < Self.wakeBytes {
        _ = condition.wait(until: Date(timeIntervalSinceNow: Self.interval))
      }
      while writing { condition.wait() }
      if !pending.isEmpty {
        // Written outside the lock: requests keep appending into the other buffer meanwhile.
        swap(&pending, &spare)
        writing = true
        condition.unlock()
        Self.writeAll(descriptor, spare)
        spare.removeAll(keepingCapacity: true)
        condition.lock()
        writing = false
        condition.broadcast()
      }
      if stopping && pending.isEmpty { break }
    }
    condition.unlock()
    finished.signal()
  }

  /// Writes `pending` with the lock held (an overfull buffer, or a flush).
  private func writeOut() {
    guard !pending.isEmpty else { return }
    Self.writeAll(descriptor, pending)
    pending.removeAll(keepingCapacity: true)
  }

  private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { buffer in
      var offset = 0
      while offset < buffer.count {
        let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
        if n < 0 && errno == EINTR { continue }
        // A full or failing disk: the lines are dropped rather than blocking requests.
        guard n > 0 else { return }
        offset += n
      }
    }
  }
}
