import Foundation
import LarderServer
import Synchronization

/// A blocking HTTP/1.1 client on a raw socket, so tests control exactly what goes on the
/// wire (pipelining, half-sent bodies, huge headers) and which connection is reused.
final class RawConnection {
  struct Response {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
  }

  enum Failure: Error {
    case connect(Int32)
    case closed
    case malformed(String)
    case io(Int32)
  }

  let fd: Int32
  private var buffer: [UInt8] = []

  init(port: Int) throws {
    fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let r = withUnsafePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    if r != 0 {
      let e = errno
      Glibc.close(fd)
      throw Failure.connect(e)
    }
    var timeout = timeval(tv_sec: 60, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
  }

  deinit { Glibc.close(fd) }

  func send(_ bytes: [UInt8]) throws {
    try bytes.withUnsafeBytes { try send($0) }
  }

  func send(_ text: String) throws { try send(Array(text.utf8)) }

  func send(_ bytes: UnsafeRawBufferPointer) throws {
    var offset = 0
    while offset < bytes.count {
      let n = Glibc.send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
      if n <= 0 { throw Failure.io(errno) }
      offset += n
    }
  }

  /// Sends RST instead of FIN, the way a crashing client disappears.
  func abort() {
    var l = linger(l_onoff: 1, l_linger: 0)
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
    Glibc.shutdown(fd, Int32(SHUT_RDWR))
  }

  private func fill() throws -> Bool {
    var chunk = [UInt8](repeating: 0, count: 65536)
    let n = recv(fd, &chunk, chunk.count, 0)
    if n < 0 { throw Failure.io(errno) }
    if n == 0 { return false }
    buffer.append(contentsOf: chunk[0..<n])
    return true
  }

  /// Reads one response; `head` says it answers a HEAD request (no body follows).
  func readResponse(head: Bool = false) throws -> Response {
    var end: Int?
    while end == nil {
      end = Self.find([13, 10, 13, 10], in: buffer)
      if end == nil, try !fill() { throw Failure.closed }
    }
    let headText = String(decoding: buffer[0..<end!], as: UTF8.self)
    buffer.removeFirst(end! + 4)
    var lines = headText.components(separatedBy: "\r\n")
    let statusLine = lines.removeFirst().split(separator: " ")
    guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw Failure.malformed(headText) }
    var headers = HTTPHeaders()
    for line in lines {
      guard let colon = line.firstIndex(of: ":") else { continue }
      headers.add(
        String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }
    if status == 100 || head || status == 204 || status == 304 {
      return Response(status: status, headers: headers, body: [])
    }
    if let length = headers["Content-Length"].flatMap(Int.init) {
      while buffer.count < length { if try !fill() { throw Failure.closed } }
      let body = Array(buffer[0..<length])
      buffer.removeFirst(length)
      return Response(status: status, headers: headers, body: body)
    }
    if headers["Transfer-Encoding"]?.lowercased() == "chunked" {
      var body: [UInt8] = []
      while true {
        var lineEnd = Self.find([13, 10], in: buffer)
        while lineEnd == nil {
          if try !fill() { throw Failure.closed }
          lineEnd = Self.find([13, 10], in: buffer)
        }
        let size =
          Int(String(decoding: buffer[0..<lineEnd!], as: UTF8.self).split(separator: ";")[0], radix: 16) ?? 0
        buffer.removeFirst(lineEnd! + 2)
        while buffer.count < size + 2 { if try !fill() { throw Failure.closed } }
        body += buffer[0..<size]
        buffer.removeFirst(size + 2)
        if size == 0 { return Response(status: status, headers: headers, body: body) }
      }
    }
    while try fill() {}
    let body = buffer
    buffer = []
    return Response(status: status, headers: headers, body: body)
  }

  /// True when the server has closed the connection (EOF or reset) with nothing more to read.
  func isClosedByServer() -> Bool {
    do { return try !fill() } catch { return true }
  }

  static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
    guard haystack.count >= needle.count else { return nil }
    for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
      if Array(haystack[i..<(i + needle.count)]) == needle { return i }
    }
    return nil
  }
}

/// Starts a server on 127.0.0.1:0 for one test and always shuts it down.
func withServer<T>(
  _ configure: (inout HTTPServer.Configuration) -> Void = { _ in }, handler: any HTTPHandler,
  metrics: Metrics = Metrics(), _ body: (HTTPServer) throws -> T
) throws -> T {
  var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
  configuration.threadPoolSize = 2
  configuration.accessLog = .disabled
  configure(&configuration)
  let server = HTTPServer(configuration: configuration, handler: handler, metrics: metrics)
  try server.start()
  defer { server.shutdown(timeout: .seconds(30)) }
  return try body(server)
}

/// Waits (polling, generous timeout) for a condition set by server threads.
func eventually(timeout: Duration = .seconds(30), _ condition: () -> Bool) -> Bool {
  let deadline = ContinuousClock.now + timeout
  while ContinuousClock.now < deadline {
    if condition() { return true }
    usleep(10_000)
  }
  return condition()
}

/// Deterministic pseudo-random bytes (xorshift), so expected hashes are reproducible.
func patternBytes(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
  var state = seed
  var out = [UInt8](repeating: 0, count: count)
  out.withUnsafeMutableBytes { raw in
    var i = 0
    while i < count {
      state ^= state << 13
      state ^= state >> 7
      state ^= state << 17
      var word = state
      for _ in 0..<8 where i < count {
        raw[i] = UInt8(truncatingIfNeeded: word)
        word >>= 8
        i += 1
      }
    }
  }
  return out
}

/// Records what the server did to body sinks, across server threads.
final class SinkEvents: Sendable {
  struct State {
    var received: Int64 = 0
    var maxChunk = 0
    var finishes = 0
    var cancels = 0
    var sha256 = ""
  }
  let state = Mutex(State())
  func read() -> State { state.withLock { $0 } }
}
