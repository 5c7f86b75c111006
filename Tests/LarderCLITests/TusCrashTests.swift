import Foundation
import LarderTestSupport
import Testing

/// tus uploads across real crashes of `larder serve`: a SIGKILL during one long PATCH keeps its
/// checkpoints, and a crash between linking a finished upload into blobs/ and the COMMIT
/// (`LARDER_CRASH_AT=before-commit`) leaves the upload resumable.
@Suite(.serialized) struct TusCrashTests {
  static let MiB = 1 << 20

  @Test func aKillDuringOneLongPatchKeepsWhatWasCheckpointed() throws {
    let box = try Sandbox()
    let content = pseudoRandomBytes(24 * Self.MiB, seed: 12)
    var server = try ServedLarder(box)
    defer { server.kill() }
    let location = try server.create(length: content.count, name: "long.bin")
    // One PATCH for the whole file; 10 MiB of it go out, then the sender stalls.
    let patch = try RawConnection(port: server.port)
    try patch.send(
      Array(
        ("PATCH \(location) HTTP/1.1\r\nHost: 127.0.0.1\r\nTus-Resumable: 1.0.0\r\n"
          + "Content-Type: application/offset+octet-stream\r\nUpload-Offset: 0\r\n"
          + "Content-Length: \(content.count)\r\n\r\n").utf8))
    for start in stride(from: 0, to: 10 * Self.MiB, by: Self.MiB) {
      try patch.send(Array(content[start..<start + Self.MiB]))
    }
    // Another connection sees the checkpoint (8 MiB, or whatever 2 s brought) while the PATCH
    // is still open.
    var seen = 0
    let deadline = Date().addingTimeInterval(60)
    while seen < 8 * Self.MiB, Date() < deadline {
      seen = try server.offset(location)
      if seen < 8 * Self.MiB { usleep(50_000) }
    }
    #expect(seen >= 8 * Self.MiB && seen <= 10 * Self.MiB, "offset \(seen) while the PATCH streams")
    server.kill()
    patch.close()

    server = try ServedLarder(box)
    let kept = try server.offset(location)
    #expect(kept >= seen && kept <= 10 * Self.MiB, "offset \(kept) after the restart, \(seen) before")
    let rest = try server.exchange(
      "PATCH", location,
      headers: [
        ("Tus-Resumable", "1.0.0"), ("Content-Type", "application/offset+octet-stream"),
        ("Upload-Offset", String(kept)),
      ], body: Array(content[kept...]))
    #expect(rest.status == 204, "\(rest.status) \(rest.text)")
    #expect(rest.headers["upload-offset"] == String(content.count))
    let stored = try server.exchange("GET", "/v0/b/app/o/long.bin?alt=media")
    #expect(stored.status == 200)
    #expect(stored.body == content)
  }

  @Test func aCrashBetweenLinkingAndCommittingTheLastPatchLeavesTheUploadResumable() throws {
    let box = try Sandbox()
    let content = pseudoRandomBytes(100_000, seed: 4)
    var server = try ServedLarder(box, environment: ["LARDER_CRASH_AT": "before-commit"])
    defer { server.kill() }
    let location = try server.create(length: content.count, name: "crash.bin")
    let first = try server.patch(location, offset: 0, Array(content[..<60_000]))
    #expect(first.status == 204)
    // The last PATCH links the upload's file into blobs/, then the process dies before COMMIT:
    // the connection ends with no answer.
    #expect(throws: ConnectionLost.self) { try server.patch(location, offset: 60_000, Array(content[60_000...])) }
    #expect(try server.waitForExit() == 86)
    #expect(box.files(under: "blobs").count == 1, "the stray link the crash left")

    server = try ServedLarder(box)
    #expect(try server.offset(location) == 60_000)
    let resent = try server.patch(location, offset: 60_000, Array(content[60_000...]))
    #expect(resent.status == 204, "\(resent.status) \(resent.text)")
    #expect(resent.headers["upload-offset"] == "100000")
    let stored = try server.exchange("GET", "/v0/b/app/o/crash.bin?alt=media")
    #expect(stored.status == 200)
    #expect(stored.body == content)
    #expect(box.files(under: "blobs").count == 1)
    #expect(box.files(under: "uploads").isEmpty)
  }
}

/// `larder serve --allow-all` (or another `policy`) on port 0 over a sandbox's data directory.
struct ServedLarder {
  let pid: pid_t
  let port: UInt16
  private var reaped = false
  var url: String { "http://127.0.0.1:\(port)" }

  init(
    _ box: Sandbox, environment: [String: String] = [:], policy: [String] = ["--allow-all"], arguments: [String] = []
  ) throws {
    let out = box.path("serve-\(UUID().uuidString).out")
    pid = try CLI.spawn(
      try CLI.binary(for: environment),
      ["serve", "--data", box.dataPath] + policy + ["--port", "0"]
        + (arguments.contains("--threads") ? [] : ["--threads", "2"]) + arguments,
      environment: environment, stdoutPath: out, stderrPath: box.path("serve.err"))
    let deadline = Date().addingTimeInterval(60)
    let prefix = "listening on http://127.0.0.1:"
    while true {
      let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
      if text.hasSuffix("\n"), text.hasPrefix(prefix), let port = UInt16(text.dropFirst(prefix.count).dropLast()) {
        self.port = port
        return
      }
      guard Date() < deadline else {
        Glibc.kill(pid, SIGKILL)
        _ = try? CLI.wait(pid, timeout: 30)
        throw HarnessFailure("serve did not start: \(text)")
      }
      usleep(20_000)
    }
  }

  mutating func kill() {
    guard !reaped else { return }
    reaped = true
    Glibc.kill(pid, SIGKILL)
    _ = try? CLI.wait(pid, timeout: 30)
  }

  mutating func waitForExit() throws -> Int32 {
    reaped = true
    return try CLI.wait(pid, timeout: 60)
  }

  func exchange(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil) throws
    -> RawResponse
  {
    let connection = try RawConnection(port: port)
    defer { connection.close() }
    var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    for (name, value) in headers { head += "\(name): \(value)\r\n" }
    if let body { head += "Content-Length: \(body.count)\r\n" }
    try connection.send(Array((head + "\r\n").utf8) + (body ?? []))
    return try connection.readResponse(head: method == "HEAD")
  }

  func create(length: Int, name: String) throws -> String {
    let r = try exchange(
      "POST", "/v0/b/app/uploads",
      headers: [
        ("Tus-Resumable", "1.0.0"), ("Upload-Length", String(length)),
        ("Upload-Metadata", "name \(Data(name.utf8).base64EncodedString())"),
      ])
    guard r.status == 201, let location = r.headers["location"] else {
      throw HarnessFailure("create: \(r.status) \(r.text)")
    }
    return location
  }

  func patch(_ location: String, offset: Int, _ body: [UInt8]) throws -> RawResponse {
    try exchange(
      "PATCH", location,
      headers: [
        ("Tus-Resumable", "1.0.0"), ("Content-Type", "application/offset+octet-stream"),
        ("Upload-Offset", String(offset)),
      ], body: body)
  }

  func offset(_ location: String) throws -> Int {
    let r = try exchange("HEAD", location, headers: [("Tus-Resumable", "1.0.0")])
    guard r.status == 200, let offset = r.headers["upload-offset"].flatMap({ Int($0) }) else {
      throw HarnessFailure("HEAD: \(r.status) \(r.headers)")
    }
    return offset
  }
}

struct RawResponse {
  var status: Int
  /// Lower-cased names.
  var headers: [String: String]
  var body: [UInt8]
  var text: String { String(decoding: body, as: UTF8.self) }
}

/// One TCP connection to 127.0.0.1 with blocking sends and a bounded wait for answers.
/// The server went away before a whole answer: sending failed, the connection was reset, or it
/// closed before the end of the answer's head.
struct ConnectionLost: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}

final class RawConnection {
  let fd: Int32

  init(port: UInt16) throws {
    fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessFailure("socket: \(errno)") }
    var timeout = timeval(tv_sec: 30, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 else {
      Glibc.close(fd)
      throw HarnessFailure("connect to \(port): \(String(cString: strerror(errno)))")
    }
  }

  private var closed = false
  func close() {
    guard !closed else { return }
    closed = true
    Glibc.close(fd)
  }
  deinit { close() }

  func send(_ bytes: [UInt8]) throws {
    var sent = 0
    while sent < bytes.count {
      let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      guard n > 0 else { throw ConnectionLost("send: \(String(cString: strerror(errno)))") }
      sent += n
    }
  }

  /// Every byte until the server closes.
  func readToEnd() throws -> [UInt8] {
    var answer: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
      let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      if n > 0 {
        answer += buffer[0..<n]
      } else if n == 0 {
        return answer
      } else if errno != EINTR {
        throw ConnectionLost("recv: \(String(cString: strerror(errno))) after \(answer.count) bytes")
      }
    }
  }

  /// Reads until the server closes (every request here says `Connection: close`).
  func readResponse(head: Bool) throws -> RawResponse {
    let answer = try readToEnd()
    let separator: [UInt8] = Array("\r\n\r\n".utf8)
    guard let end = answer.indices.first(where: { answer[$0...].starts(with: separator) }) else {
      throw ConnectionLost("no complete answer: \(answer.count) bytes")
    }
    let lines = String(decoding: answer[..<end], as: UTF8.self).components(separatedBy: "\r\n")
    let status = Int(lines[0].split(separator: " ")[1]) ?? 0
    var headers: [String: String] = [:]
    for line in lines.dropFirst() {
      guard let colon = line.firstIndex(of: ":") else { continue }
      headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return RawResponse(status: status, headers: headers, body: head ? [] : Array(answer[(end + 4)...]))
  }
}
