import Foundation
import Synchronization

/// A TCP proxy on 127.0.0.1 in front of the S3 engine that passes every byte through, except
/// that while ``holding`` it keeps each DELETE request back: it stores the request exactly as the
/// client signed it and cuts the client's connection without an answer, so the client sees its
/// DELETE fail (retries, gives up) while the store has not applied it. ``release()`` later sends
/// each kept request to the store: a DELETE that failed or timed out on the client and is
/// applied afterwards, as a store behind a slow network or a retrying load balancer may do.
final class DeleteHoldingProxy: Sendable {
  let port: UInt16
  private let upstream: UInt16
  private let listener: Int32
  private let holds = Atomic<Bool>(false)
  private let held = Mutex<[[UInt8]]>([])

  init(upstreamPort: UInt16) throws {
    upstream = upstreamPort
    (listener, port) = try CannedHTTPServer.listen(backlog: 32)
    Thread { [self] in acceptLoop() }.start()
  }

  /// Whether DELETE requests are kept back now.
  var holding: Bool {
    get { holds.load(ordering: .sequentiallyConsistent) }
    set { holds.store(newValue, ordering: .sequentiallyConsistent) }
  }

  /// How many DELETE requests are kept back.
  var heldCount: Int { held.withLock { $0.count } }

  /// Sends every kept request to the store, each on a connection of its own; returns the
  /// status codes the store answered.
  func release() throws -> [Int] {
    let requests = held.withLock { kept in
      defer { kept.removeAll() }
      return kept
    }
    return try requests.map { request in
      let fd = try Self.connect(to: upstream)
      defer { close(fd) }
      try Self.send(request, to: fd)
      var answer: [UInt8] = []
      var chunk = [UInt8](repeating: 0, count: 4096)
      while Self.headerEnd(answer) == nil {
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { break }
        answer += chunk[0..<n]
      }
      // "HTTP/1.1 204 No Content": the code is the second word of the status line.
      let line = String(decoding: answer.prefix(while: { $0 != 0x0D }), as: UTF8.self)
      return line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? -1
    }
  }

  func stop() { CannedHTTPServer.stopListening(listener) }

  private func acceptLoop() {
    while true {
      let client = accept(listener, nil, nil)
      guard client >= 0 else { return }
      guard let server = try? Self.connect(to: upstream) else {
        close(client)
        continue
      }
      // Answers flow back untouched; requests are read here, one header block at a time.
      Thread {
        Self.pump(from: server, to: client)
        shutdown(client, Int32(SHUT_WR))
      }.start()
      Thread { [self] in
        forwardRequests(from: client, to: server)
        shutdown(server, Int32(SHUT_RDWR))
        shutdown(client, Int32(SHUT_RDWR))
        // Both pumps have ended once each side is shut; the descriptors go with a delay so the
        // other thread never reads a reused number.
        DispatchQueue.global().asyncAfter(deadline: .now() + 5) {
          close(client)
          close(server)
        }
      }.start()
    }
  }

  /// Copies the client's bytes to the store, except a DELETE while holding: kept, and the
  /// connection cut. A request starts a new send from libcurl (it waits for each answer), so a
  /// read that begins with `DELETE ` begins a DELETE request; it has no body.
  private func forwardRequests(from client: Int32, to server: Int32) {
    var chunk = [UInt8](repeating: 0, count: 64 << 10)
    while true {
      let n = chunk.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
      guard n > 0 else { return }
      var bytes = Array(chunk[0..<n])
      if holding, bytes.starts(with: Array("DELETE ".utf8)) {
        while Self.headerEnd(bytes) == nil {
          let more = chunk.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
          guard more > 0 else { return }
          bytes += chunk[0..<more]
        }
        held.withLock { $0.append(bytes) }
        return
      }
      guard (try? Self.send(bytes, to: server)) != nil else { return }
    }
  }

  private static func pump(from source: Int32, to target: Int32) {
    var chunk = [UInt8](repeating: 0, count: 64 << 10)
    while true {
      let n = chunk.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
      guard n > 0, (try? send(Array(chunk[0..<n]), to: target)) != nil else { return }
    }
  }

  private static func headerEnd(_ bytes: [UInt8]) -> Int? {
    guard bytes.count >= 4 else { return nil }
    return (0...(bytes.count - 4)).first {
      bytes[$0] == 0x0D && bytes[$0 + 1] == 0x0A && bytes[$0 + 2] == 0x0D && bytes[$0 + 3] == 0x0A
    }
  }

  private static func send(_ bytes: [UInt8], to fd: Int32) throws {
    var offset = 0
    while offset < bytes.count {
      let n = bytes[offset...].withUnsafeBytes {
        Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
      }
      guard n > 0 else { throw POSIXError(.EPIPE) }
      offset += n
    }
  }

  private static func connect(to port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = port.bigEndian
    let ok = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
      }
    }
    guard ok else {
      close(fd)
      throw POSIXError(.ECONNREFUSED)
    }
    return fd
  }
}
