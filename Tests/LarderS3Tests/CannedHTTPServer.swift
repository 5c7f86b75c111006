import Foundation
import Synchronization

/// An HTTP server on 127.0.0.1 that answers each request with the next canned response and
/// records the request lines: for the failures a real store cannot be made to produce on cue
/// (a 503 then a success, a part that fails every time). Everything else runs against Swift.
final class CannedHTTPServer: Sendable {
  struct Response: Sendable {
    var status: Int
    var headers: [String] = []
    var body = ""

    /// The answer to CreateMultipartUpload for `key` in `bucket`.
    static func multipartStarted(key: String, uploadID: String) -> Response {
      Response(
        status: 200,
        body: "<InitiateMultipartUploadResult><Bucket>bucket</Bucket><Key>\(key)</Key>"
          + "<UploadId>\(uploadID)</UploadId></InitiateMultipartUploadResult>")
    }
  }

  let port: UInt16
  private let listener: Int32
  private let responses: Mutex<[Response]>
  private let received = Mutex<[String]>([])

  /// The request lines seen so far, e.g. `PUT /bucket/key?partNumber=1&uploadId=U`.
  var requests: [String] { received.withLock { $0 } }

  init(_ responses: [Response]) throws {
    self.responses = Mutex(responses)
    (listener, port) = try Self.listen(backlog: 16)
    let thread = Thread { [self] in acceptLoop() }
    thread.start()
  }

  /// A socket listening on 127.0.0.1 at a port the kernel picks; the caller closes it.
  static func listen(backlog: Int32) throws -> (socket: Int32, port: UInt16) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
      }
    }
    guard ok, Glibc.listen(fd, backlog) == 0 else {
      close(fd)
      throw POSIXError(.EADDRINUSE)
    }
    return (fd, UInt16(bigEndian: address.sin_port))
  }

  /// Stops accepting; connections in progress end with their client.
  func stop() { Self.stopListening(listener) }

  /// Closes a socket from ``listen(backlog:)``, waking its accept loop.
  static func stopListening(_ listener: Int32) {
    shutdown(listener, Int32(SHUT_RDWR))
    close(listener)
  }

  private func acceptLoop() {
    while true {
      let connection = accept(listener, nil, nil)
      guard connection >= 0 else { return }
      Thread { [self] in
        serve(connection)
        close(connection)
      }.start()
    }
  }

  private func serve(_ connection: Int32) {
    var buffer: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 << 10)
    func fill() -> Bool {
      let n = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
      guard n > 0 else { return false }
      buffer += chunk[0..<n]
      return true
    }
    while true {
      var end: Int?
      while end == nil {
        if let r = buffer.firstRange(of: Array("\r\n\r\n".utf8)) {
          end = r.upperBound
        } else if !fill() {
          return
        }
      }
      let head = String(decoding: buffer[0..<end!], as: UTF8.self)
      buffer.removeFirst(end!)
      let lines = head.split(separator: "\r\n")
      let requestLine = lines.first.map { $0.split(separator: " ").dropLast().joined(separator: " ") } ?? ""
      received.withLock { $0.append(requestLine) }
      var contentLength = 0
      var expectsContinue = false
      for line in lines.dropFirst() {
        let lower = line.lowercased()
        if lower.hasPrefix("content-length:") {
          contentLength = Int(lower.dropFirst(15).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        if lower.hasPrefix("expect:") && lower.contains("100-continue") { expectsContinue = true }
      }
      if expectsContinue { send(connection, "HTTP/1.1 100 Continue\r\n\r\n") }
      while buffer.count < contentLength { if !fill() { return } }
      buffer.removeFirst(contentLength)
      let response = responses.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] }
      var text = "HTTP/1.1 \(response.status) Canned\r\nContent-Length: \(response.body.utf8.count)\r\n"
      for header in response.headers { text += header + "\r\n" }
      text += "\r\n"
      // A HEAD answer has no body; the others carry theirs.
      if !requestLine.hasPrefix("HEAD") { text += response.body }
      send(connection, text)
    }
  }

  private func send(_ connection: Int32, _ text: String) {
    let bytes = Array(text.utf8)
    var sent = 0
    while sent < bytes.count {
      let n = bytes[sent...].withUnsafeBytes {
        Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
      }
      guard n > 0 else { return }
      sent += n
    }
  }
}
