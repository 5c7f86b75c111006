import Foundation
import Larder
import LarderServer
import Synchronization

/// A live `LarderService` on 127.0.0.1:0 over a fresh temporary data directory.
///
/// ```swift
/// try withService { s in
///   let r = try s.send(.post("/v0/b/app/o?name=a", body: [1, 2, 3]))
/// }
/// ```
final class LiveService {
  let directory: URL
  let service: LarderService
  var port: Int { service.port }
  var base: String { "http://127.0.0.1:\(port)" }
  var tmpDirectory: URL { directory.appendingPathComponent("tmp") }
  var blobsDirectory: URL { directory.appendingPathComponent("blobs/sha256") }

  init(policy: LarderService.Options.Policy = .allowAll, configure: (inout LarderService.Options) -> Void = { _ in }) throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-api-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    var options = LarderService.Options(dataDirectory: directory, policy: policy)
    options.http.accessLog = .disabled
    options.http.threadPoolSize = 2
    configure(&options)
    do {
      service = try LarderService(options: options)
      try service.start()
    } catch {
      try? FileManager.default.removeItem(at: directory)
      throw error
    }
  }

  func close() {
    service.stop(timeout: .seconds(30))
    try? FileManager.default.removeItem(at: directory)
  }

  /// Sends one request on a new connection (with `Connection: close`) and reads the whole answer.
  func send(_ request: WireRequest) throws -> WireResponse {
    let connection = try WireConnection(port: port)
    try connection.send(request.bytes(closing: true))
    return try connection.readResponse(head: request.method == "HEAD")
  }

  /// Uploads `body` as `name` and returns the metadata JSON (expects 200).
  @discardableResult
  func upload(_ name: String, _ body: [UInt8], bucket: String = "app", headers: [(String, String)] = []) throws -> [String: Any] {
    let r = try send(.init("POST", "/v0/b/\(bucket)/o?name=\(enc(name))", headers: headers, body: body))
    guard r.status == 200, let json = r.json else { throw WireFailure.unexpected("upload \(name): \(r.status) \(r.text)") }
    return json
  }

  /// Files left in `tmp/` (uploads in flight or leaked).
  func tmpEntries() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: tmpDirectory.path)) ?? [] }

  /// Regular files under `blobs/sha256/`.
  func blobFiles() -> [String] {
    guard let e = FileManager.default.enumerator(atPath: blobsDirectory.path) else { return [] }
    var out: [String] = []
    while let p = e.nextObject() as? String {
      var isDir: ObjCBool = false
      if FileManager.default.fileExists(atPath: blobsDirectory.appendingPathComponent(p).path, isDirectory: &isDir), !isDir.boolValue {
        out.append(p)
      }
    }
    return out
  }
}

/// Runs `body` against a fresh live service and always stops it.
func withService<T>(
  policy: LarderService.Options.Policy = .allowAll, configure: (inout LarderService.Options) -> Void = { _ in },
  _ body: (LiveService) throws -> T
) throws -> T {
  let s = try LiveService(policy: policy, configure: configure)
  defer { s.close() }
  return try body(s)
}

/// Percent-encodes one path segment or query value (everything but unreserved characters).
func enc(_ s: String) -> String { PercentEncoding.encodeComponent(s) }

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

struct WireResponse {
  var status: Int
  var headers: HTTPHeaders
  var body: [UInt8]
  var text: String { String(decoding: body, as: UTF8.self) }
  var json: [String: Any]? { try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] }
  /// `error` object of a JSON error body.
  var error: [String: Any]? { json?["error"] as? [String: Any] }
  subscript(_ name: String) -> String? { headers[name] }
}

/// A blocking client on a raw socket: exact bytes out, exact bytes in.
final class WireConnection {
  let fd: Int32
  private var buffer: [UInt8] = []

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

  deinit { Glibc.close(fd) }

  func send(_ bytes: [UInt8]) throws {
    try bytes.withUnsafeBytes { raw in
      var offset = 0
      while offset < raw.count {
        let n = Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { throw WireFailure.io(errno) }
        offset += n
      }
    }
  }

  func send(_ text: String) throws { try send(Array(text.utf8)) }

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
  func readResponse(head: Bool = false) throws -> WireResponse {
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
    if status == 100 { return try readResponse(head: head) }
    if head || status == 204 || status == 304 { return WireResponse(status: status, headers: headers, body: []) }
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
    while try fill() {}
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

/// Polls `condition` (server threads act asynchronously) with a generous timeout.
func pollUntil(timeout: Duration = .seconds(20), _ condition: () -> Bool) -> Bool {
  let deadline = ContinuousClock.now + timeout
  while ContinuousClock.now < deadline {
    if condition() { return true }
    usleep(20_000)
  }
  return condition()
}

/// Deterministic pseudo-random bytes (xorshift64), so contents differ per seed and are reproducible.
func testBytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
  var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
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

/// FIPS 180-4 SHA-256, written here so expected digests do not come from the code under test.
enum TestSHA256 {
  private static let k: [UInt32] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]

  static func hex(_ message: [UInt8]) -> String {
    var h: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
    var data = message
    let bitLength = UInt64(message.count) * 8
    data.append(0x80)
    while data.count % 64 != 56 { data.append(0) }
    for i in (0..<8).reversed() { data.append(UInt8(truncatingIfNeeded: bitLength >> (UInt64(i) * 8))) }
    var w = [UInt32](repeating: 0, count: 64)
    func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
    data.withUnsafeBufferPointer { p in
      var chunk = 0
      while chunk < p.count {
        for t in 0..<16 {
          let b = chunk + t * 4
          w[t] = UInt32(p[b]) << 24 | UInt32(p[b + 1]) << 16 | UInt32(p[b + 2]) << 8 | UInt32(p[b + 3])
        }
        for t in 16..<64 {
          let s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
          let s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
          w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, hh) = (h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7])
        for t in 0..<64 {
          let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
          let ch = (e & f) ^ (~e & g)
          let t1 = hh &+ s1 &+ ch &+ k[t] &+ w[t]
          let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
          let maj = (a & b) ^ (a & c) ^ (b & c)
          let t2 = s0 &+ maj
          hh = g
          g = f
          f = e
          e = d &+ t1
          d = c
          c = b
          b = a
          a = t1 &+ t2
        }
        h[0] = h[0] &+ a
        h[1] = h[1] &+ b
        h[2] = h[2] &+ c
        h[3] = h[3] &+ d
        h[4] = h[4] &+ e
        h[5] = h[5] &+ f
        h[6] = h[6] &+ g
        h[7] = h[7] &+ hh
        chunk += 64
      }
    }
    return h.map { v in
      let s = String(v, radix: 16)
      return String(repeating: "0", count: 8 - s.count) + s
    }.joined()
  }
}

/// Runs a program with `posix_spawn` (Foundation's `Process` crashed on EINTR under parallel
/// tests), stdout and stderr into files; returns the exit status and both outputs.
struct SpawnResult {
  var status: Int32
  var stdout: String
  var stderr: String
}

func spawnProgram(_ path: String, _ arguments: [String], environment: [String: String]? = nil) throws
  -> SpawnResult
{
  let stem = FileManager.default.temporaryDirectory.appendingPathComponent("larder-spawn-\(UUID().uuidString)").path
  let (outPath, errPath) = (stem + ".out", stem + ".err")
  defer {
    unlink(outPath)
    unlink(errPath)
  }
  var actions = posix_spawn_file_actions_t()
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
  posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
  let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
  defer { for a in argv { free(a) } }
  var env = ProcessInfo.processInfo.environment
  for (k, v) in environment ?? [:] { env[k] = v }
  let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
  defer { for e in envp { free(e) } }
  var pid = pid_t()
  let spawned = posix_spawn(&pid, path, &actions, nil, argv, envp)
  guard spawned == 0 else { throw WireFailure.unexpected("posix_spawn \(path): \(spawned)") }
  var status: Int32 = 0
  while waitpid(pid, &status, 0) < 0 {
    guard errno == EINTR else { throw WireFailure.unexpected("waitpid: \(errno)") }
  }
  let exit: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
  let out = String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self)
  let err = String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self)
  return SpawnResult(status: exit, stdout: out, stderr: err)
}
