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
  /// `ok`, or why the request ended early: `error`, `timeout`, `shutdown`, `client_abort`.
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
  public var json: String { String(decoding: jsonBytes(), as: UTF8.self) }

  /// ``json`` as UTF-8, built straight into one buffer: with the log on, formatting the line
  /// through strings, `vsnprintf` and `gmtime_r` cost about as much as serving a small file.
  func jsonBytes() -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(256)
    func put(_ text: StaticString) {
      out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }
    // Each field is its key (with the separator before it) and its value.
    func string(_ key: StaticString, _ value: String) {
      put(key)
      Self.appendQuoted(value, to: &out)
    }
    func integer(_ key: StaticString, _ value: Int64) {
      put(key)
      Self.appendDecimal(value, to: &out)
    }
    put("{\"time\":\"")
    Self.appendISO8601(time, to: &out)
    string("\",\"request_id\":", requestID)
    string(",\"method\":", method)
    string(",\"path\":", path)
    string(",\"route\":", route)
    integer(",\"status\":", Int64(status))
    integer(",\"bytes_in\":", bytesIn)
    integer(",\"bytes_out\":", bytesOut)
    put(",\"duration_ms\":")
    Self.appendFixed3(durationMilliseconds, to: &out)
    string(",\"remote\":", remote)
    string(",\"outcome\":", outcome)
    put("}")
    return out
  }

  static func appendDecimal(_ value: Int64, to out: inout [UInt8]) {
    if value < 0 {
      out.append(contentsOf: String(value).utf8)
      return
    }
    var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
      UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
      (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    var n = UInt64(value)
    var count = 0
    withUnsafeMutableBytes(of: &digits) { d in
      repeat {
        d[19 - count] = UInt8(0x30 + n % 10)
        n /= 10
        count += 1
      } while n > 0
      out.append(contentsOf: d[(20 - count)...])
    }
  }

  /// `%.3f` of `value`, digit for digit as glibc prints it: the exact binary value rounded to
  /// three decimals, ties to even. Durations (non-negative, under a million seconds) take the
  /// integer path; anything else goes through `vsnprintf`.
  static func appendFixed3(_ value: Double, to out: inout [UInt8]) {
    guard value.isFinite, value >= 0, value < 1e9 else {
      out.append(contentsOf: printf("%.3f", value).utf8)
      return
    }
    // value = significand × 2^exponent exactly; × 1000, then shifted right with exact rounding.
    let significand = value.significandBitPattern | (value.isNormal ? 1 << 52 : 0)
    let exponent = value.isNormal ? Int(value.exponent) - 52 : -1074
    let scaled = significand * 1000  // < 2^63: significand < 2^53
    var thousandths: UInt64
    if exponent >= 0 {
      thousandths = scaled << UInt64(exponent)  // value < 1e9, so no overflow
    } else if -exponent >= 64 {
      thousandths = 0  // below 2^-11 × 1000 / 2: rounds to zero
    } else {
      let shift = UInt64(-exponent)
      thousandths = scaled >> shift
      let remainder = scaled & ((1 << shift) - 1)
      let half: UInt64 = 1 << (shift - 1)
      if remainder > half || (remainder == half && thousandths & 1 == 1) { thousandths += 1 }
    }
    appendDecimal(Int64(thousandths / 1000), to: &out)
    let fraction = thousandths % 1000
    out.append(0x2E)
    out.append(UInt8(0x30 + fraction / 100))
    out.append(UInt8(0x30 + fraction / 10 % 10))
    out.append(UInt8(0x30 + fraction % 10))
  }

  /// ``iso8601(_:)`` appended as bytes, from the same ``CivilTime`` as ``HTTPDate/format(_:)`` (no
  /// `gmtime_r`, whose time-zone lock every request would take) for the years 1970–9999.
  static func appendISO8601(_ time: Double, to out: inout [UInt8]) {
    guard time.isFinite, time >= 0, time < 253_402_300_800 else {
      out.append(contentsOf: iso8601(time).utf8)
      return
    }
    let seconds = Int64(time.rounded(.down))
    let millis = min(Int((time - Double(seconds)) * 1000), 999)
    let civil = CivilTime(secondsSince1970: seconds)
    let (year, month, day, secondOfDay) = (civil.year, civil.month, civil.day, civil.secondOfDay)
    func two(_ v: Int) {
      out.append(UInt8(0x30 + v / 10))
      out.append(UInt8(0x30 + v % 10))
    }
    two(year / 100)
    two(year % 100)
    out.append(0x2D)
    two(month)
    out.append(0x2D)
    two(day)
    out.append(0x54)
    two(secondOfDay / 3600)
    out.append(0x3A)
    two(secondOfDay / 60 % 60)
    out.append(0x3A)
    two(secondOfDay % 60)
    out.append(0x2E)
    out.append(UInt8(0x30 + millis / 100))
    two(millis % 100)
    out.append(0x5A)
  }

  /// ``quote(_:)`` appended as bytes. Only ASCII is ever escaped, so the UTF-8 of everything
  /// else goes through unchanged, byte for byte.
  static func appendQuoted(_ text: String, to out: inout [UInt8]) {
    let hex: StaticString = "0123456789abcdef"
    out.append(0x22)
    for byte in text.utf8 {
      switch byte {
      case 0x22: out.append(0x5C); out.append(0x22)
      case 0x5C: out.append(0x5C); out.append(0x5C)
      case 0x0A: out.append(0x5C); out.append(0x6E)
      case 0x0D: out.append(0x5C); out.append(0x72)
      case 0x09: out.append(0x5C); out.append(0x74)
      case 0..<0x20, 0x7F:
        out.append(contentsOf: [0x5C, 0x75, 0x30, 0x30])
        out.append(hex.utf8Start[Int(byte >> 4)])
        out.append(hex.utf8Start[Int(byte & 0xF)])
      default: out.append(byte)
      }
    }
    out.append(0x22)
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
    case .buffered(let writer): writer.append(entry.jsonBytes())
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

  func append(_ line: [UInt8]) {
    condition.lock()
    pending.append(contentsOf: line)
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
