import Foundation
import Larder
import LarderCrypto
import LarderServer

/// One HTTP exchange on its own connection (`Connection: close`), bytes exactly as given.
struct TusWire {
  struct Response {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    subscript(name: String) -> String? {
      headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
    var text: String { String(decoding: body, as: UTF8.self) }
  }

  enum Failure: Error {
    case connect(Int32)
    case io(Int32)
    case malformed(String)
  }

  let port: Int

  static func connect(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let r = withUnsafePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard r == 0 else {
      let e = errno
      close(fd)
      throw Failure.connect(e)
    }
    var timeout = timeval(tv_sec: 60, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    return fd
  }

  static func send(_ fd: Int32, _ bytes: [UInt8]) throws {
    var offset = 0
    while offset < bytes.count {
      let n = bytes.withUnsafeBytes {
        Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
      }
      if n <= 0 { throw Failure.io(errno) }
      offset += n
    }
  }

  static func head(_ method: String, _ path: String, _ headers: [(String, String)], bodyLength: Int?)
    -> [UInt8]
  {
    var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    for (k, v) in headers { text += "\(k): \(v)\r\n" }
    if let bodyLength { text += "Content-Length: \(bodyLength)\r\n" }
    text += "\r\n"
    return Array(text.utf8)
  }

  /// Reads until the server closes, then parses one response.
  static func readResponse(_ fd: Int32, head: Bool) throws -> Response {
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let n = recv(fd, &chunk, chunk.count, 0)
      if n < 0 {
        if errno == EINTR { continue }
        if errno == ECONNRESET && !data.isEmpty { break }
        throw Failure.io(errno)
      }
      if n == 0 { break }
      data.append(contentsOf: chunk[0..<n])
    }
    guard let end = (0..<max(0, data.count - 3)).first(where: { data[$0..<$0 + 4] == [13, 10, 13, 10] })
    else {
      throw Failure.malformed(String(decoding: data, as: UTF8.self))
    }
    let lines = String(decoding: data[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
    let statusParts = lines[0].split(separator: " ")
    guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw Failure.malformed(lines[0]) }
    var headers: [(String, String)] = []
    for line in lines.dropFirst() {
      guard let colon = line.firstIndex(of: ":") else { continue }
      headers.append(
        (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
    }
    return Response(status: status, headers: headers, body: head ? [] : Array(data[(end + 4)...]))
  }

  func request(
    _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
  ) throws -> Response {
    let fd = try Self.connect(port: port)
    defer { close(fd) }
    try Self.send(fd, Self.head(method, path, headers, bodyLength: body?.count))
    if let body, !body.isEmpty {
      // The server may answer (and close) before reading a refused body.
      try? Self.send(fd, body)
    }
    return try Self.readResponse(fd, head: method == "HEAD")
  }
}

/// A live Larder service on 127.0.0.1 with tus mounted, in a temporary data directory.
final class TusHarness: @unchecked Sendable {
  let directory: URL
  let service: LarderService
  let wire: TusWire
  static let tus = ("Tus-Resumable", "1.0.0")
  static let stream = ("Content-Type", "application/offset+octet-stream")

  init(
    policy: LarderService.Options.Policy = .allowAll, maxUploadSize: Int64 = 5 << 30,
    publicURL: String? = nil,
    uploadExpiry: Duration = .seconds(3600), corsOrigins: [String] = ["*"], connectionTimeout: Int = 60
  ) throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-tus-\(UUID().uuidString)")
    var options = LarderService.Options(dataDirectory: directory, policy: policy)
    options.http.accessLog = .disabled
    options.http.connectionTimeout = connectionTimeout
    options.maxUploadSize = maxUploadSize
    options.publicURL = publicURL
    options.uploadExpiry = uploadExpiry
    options.corsOrigins = corsOrigins
    service = try LarderService(options: options)
    try service.start()
    wire = TusWire(port: service.port)
  }

  deinit {
    service.stop()
    try? FileManager.default.removeItem(at: directory)
  }

  static func metadata(_ pairs: [(String, String)]) -> String {
    pairs.map { "\($0.0) \(Data($0.1.utf8).base64EncodedString())" }.joined(separator: ",")
  }

  /// POSTs a creation and returns the upload's path (from `Location`).
  func create(length: Int?, name: String? = "file.bin", extra: [(String, String)] = [], token: String? = nil)
    throws
    -> String
  {
    var headers = [Self.tus]
    if let length {
      headers.append(("Upload-Length", String(length)))
    } else {
      headers.append(("Upload-Defer-Length", "1"))
    }
    if let name { headers.append(("Upload-Metadata", Self.metadata([("name", name)]))) }
    if let token { headers.append(("Authorization", "Bearer \(token)")) }
    let r = try wire.request("POST", "/v0/b/app/uploads", headers: headers + extra)
    guard r.status == 201, let location = r["Location"] else {
      throw TusWire.Failure.malformed("create: \(r.status) \(r.text)")
    }
    return location
  }

  func patch(_ path: String, offset: Int, _ body: [UInt8], extra: [(String, String)] = []) throws
    -> TusWire.Response
  {
    try wire.request(
      "PATCH", path, headers: [Self.tus, Self.stream, ("Upload-Offset", String(offset))] + extra, body: body)
  }

  func head(_ path: String, extra: [(String, String)] = []) throws -> TusWire.Response {
    try wire.request("HEAD", path, headers: [Self.tus] + extra)
  }

  func objectBytes(_ name: String) throws -> TusWire.Response {
    try wire.request("GET", "/v0/b/app/o/\(PercentEncoding.encodeComponent(name))?alt=media")
  }

  /// Upload files present in data/uploads.
  var uploadFiles: [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("uploads").path))
      ?? []).sorted()
  }
}

func pattern(_ count: Int, seed: UInt8 = 7) -> [UInt8] {
  (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &+ ($0 >> 8)) }
}

func sha256Hex(_ bytes: [UInt8]) -> String { Hex.encode(Digest.hash(.sha256, bytes)) }

func checksumHeader(_ algorithm: DigestAlgorithm, _ bytes: [UInt8]) -> (String, String) {
  ("Upload-Checksum", "\(algorithm.rawValue) \(Data(Digest.hash(algorithm, bytes)).base64EncodedString())")
}

/// A policy that denies uploads whose content libmagic calls PNG, and creations named `forbidden*`.
struct NoPNGPolicy: AccessPolicy {
  func decide(_ request: AccessRequest) -> AccessDecision {
    if request.name.hasPrefix("forbidden") { return .deny("name") }
    if let incoming = request.incoming, incoming.contentType == "image/png" { return .deny("png") }
    return .allow("ok")
  }
}
