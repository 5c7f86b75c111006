import Foundation
import LarderHTTP
import LarderServer

/// Why a raw-socket exchange failed (the harness, not the server under test).
enum WireFailure: Error, CustomStringConvertible {
  case connect(Int32), closed, io(Int32), malformed(String), unexpected(String)
  var description: String {
    switch self {
    case .connect(let e): "connect failed: errno \(e)"
    case .closed: "connection closed before a full response"
    case .io(let e): "socket error: errno \(e)"
    case .malformed(let s): "malformed response: \(s)"
    case .unexpected(let s): s
    }
  }
}

/// One HTTP/1.1 request, written byte for byte as given (nothing is added but
/// `Host`, `Content-Length` for a body, and `Connection: close` when asked).
struct WireRequest {
  var method: String
  var target: String
  var headers: [(String, String)]
  var body: [UInt8]
  var version = "HTTP/1.1"
  /// Add `Content-Length` for the body (off to test missing or lying lengths).
  var addLength = true

  init(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8] = []) {
    self.method = method
    self.target = target
    self.headers = headers
    self.body = body
  }

  static func get(_ target: String, _ headers: [(String, String)] = []) -> WireRequest { .init("GET", target, headers: headers) }
  static func head(_ target: String, _ headers: [(String, String)] = []) -> WireRequest { .init("HEAD", target, headers: headers) }

  func head(closing: Bool) -> [UInt8] {
    var text = "\(method) \(target) \(version)\r\nHost: 127.0.0.1\r\n"
    for (k, v) in headers { text += "\(k): \(v)\r\n" }
    if addLength && (!body.isEmpty || method == "POST" || method == "PATCH" || method == "PUT") {
      text += "Content-Length: \(body.count)\r\n"
    }
    if closing { text += "Connection: close\r\n" }
    return Array((text + "\r\n").utf8)
  }

  func bytes(closing: Bool) -> [UInt8] { head(closing: closing) + body }
}

/// One parsed response: status, headers (case-insensitive lookup) and the decoded body.
struct WireResponse {
  var status: Int
  var headers: HTTPHeaders
  var body: [UInt8]
  /// The route label, when the exchange ran in process (``InProcessService``); the wire does not say.
  var route: String? = nil
  var text: String { String(decoding: body, as: UTF8.self) }
  var json: [String: Any]? { try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] }
  /// `error` object of a JSON error body.
  var error: [String: Any]? { json?["error"] as? [String: Any] }
  subscript(_ name: String) -> String? { headers[name] }
}

/// A blocking HTTP/1.1 client on a raw socket to 127.0.0.1: exact bytes out, exact bytes in, so
/// tests control what goes on the wire (pipelining, half-sent bodies, huge headers, resets) and
/// which connection is reused.
final class WireConnection {
  let fd: Int32
  private var buffer: [UInt8] = []
  private var isClosed = false

  init(port: Int) throws {
    fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let r = withUnsafePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if r != 0 {
      let e = errno
      Glibc.close(fd)
      throw WireFailure.connect(e)
    }
    var timeout = timeval(tv_sec: 60, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
  }

  deinit { close() }

  /// Closes the socket now (a client that goes away); later calls do nothing.
  func close() {
    guard !isClosed else { return }
    isClosed = true
    Glibc.close(fd)
  }

  /// Sends RST instead of FIN, the way a crashing client disappears.
  func abort() {
    var l = linger(l_onoff: 1, l_linger: 0)
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
    Glibc.shutdown(fd, Int32(SHUT_RDWR))
  }

  func send(_ bytes: [UInt8]) throws {
    try bytes.withUnsafeBytes { try send($0) }
  }

  func send(_ text: String) throws { try send(Array(text.utf8)) }

  func send(_ bytes: UnsafeRawBufferPointer) throws {
    var offset = 0
    while offset < bytes.count {
      let n = Glibc.send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { throw WireFailure.io(errno) }
      offset += n
    }
  }

  /// True when the server has closed the connection (EOF or reset) with nothing more to read.
  func isClosedByServer() -> Bool {
    do { return try !fill() } catch { return true }
  }

  private func fill() throws -> Bool {
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
      let n = recv(fd, &chunk, chunk.count, 0)
      if n < 0 && errno == EINTR { continue }
      if n < 0 { throw WireFailure.io(errno) }
      if n == 0 { return false }
      buffer.append(contentsOf: chunk[0..<n])
      return true
    }
  }

  /// Reads one response (`head`: it answers a HEAD, so no body follows whatever the length says).
  /// A `100 Continue` is skipped unless `interim` asks for it to be returned.
  func readResponse(head: Bool = false, interim: Bool = false) throws -> WireResponse {
    var end: Int?
    var searchFrom = 0
    while end == nil {
      end = Self.find([13, 10, 13, 10], in: buffer, from: searchFrom)
      if end == nil {
        searchFrom = max(0, buffer.count - 3)
        if try !fill() { throw WireFailure.closed }
      }
    }
    let headText = String(decoding: buffer[0..<end!], as: UTF8.self)
    buffer.removeFirst(end! + 4)
    var lines = headText.components(separatedBy: "\r\n")
    let statusLine = lines.removeFirst().split(separator: " ")
    guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw WireFailure.malformed(headText) }
    var headers = HTTPHeaders()
    for line in lines {
      guard let colon = line.firstIndex(of: ":") else { continue }
      headers.add(String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }
    if status == 100 && !interim { return try readResponse(head: head) }
    if status == 100 || head || status == 204 || status == 304 {
      return WireResponse(status: status, headers: headers, body: [])
    }
    if let length = headers["Content-Length"].flatMap(Int.init) {
      while buffer.count < length { if try !fill() { throw WireFailure.closed } }
      let body = Array(buffer[0..<length])
      buffer.removeFirst(length)
      return WireResponse(status: status, headers: headers, body: body)
    }
    if headers["Transfer-Encoding"]?.lowercased() == "chunked" {
      var body: [UInt8] = []
      while true {
        var lineEnd = Self.find([13, 10], in: buffer)
        while lineEnd == nil {
          if try !fill() { throw WireFailure.closed }
          lineEnd = Self.find([13, 10], in: buffer)
        }
        let size = Int(String(decoding: buffer[0..<lineEnd!], as: UTF8.self).split(separator: ";")[0], radix: 16) ?? 0
        buffer.removeFirst(lineEnd! + 2)
        while buffer.count < size + 2 { if try !fill() { throw WireFailure.closed } }
        body += buffer[0..<size]
        buffer.removeFirst(size + 2)
        if size == 0 { return WireResponse(status: status, headers: headers, body: body) }
      }
    }
    // No length: the body runs to the end of the connection (a reset after the data ends it too).
    do {
      while try fill() {}
    } catch WireFailure.io(ECONNRESET) where !buffer.isEmpty {}
    defer { buffer = [] }
    return WireResponse(status: status, headers: headers, body: buffer)
  }

  static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int = 0) -> Int? {
    guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
    for i in start...(haystack.count - needle.count) where haystack[i] == needle[0] {
      var ok = true
      for j in 1..<needle.count where haystack[i + j] != needle[j] {
        ok = false
        break
      }
      if ok { return i }
    }
    return nil
  }
}
