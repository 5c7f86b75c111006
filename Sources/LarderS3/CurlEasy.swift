internal import CCurl
import Foundation

/// The body of one HTTP exchange: nothing, bytes in memory, or a byte range of a file that is
/// read as libcurl asks for it (so a 16 MiB part never sits in memory).
public enum S3Body: Sendable {
  case empty
  case bytes([UInt8])
  /// `length` bytes of the file at `path` from `offset`.
  case file(path: String, offset: Int64, length: Int64)

  var length: Int64 {
    switch self {
    case .empty: 0
    case .bytes(let b): Int64(b.count)
    case .file(_, _, let length): length
    }
  }
}

/// One HTTP request as libcurl performs it, already addressed and with its S3 headers.
struct CurlExchange {
  var method: String
  var url: String
  var headers: [String]
  var body: S3Body = .empty
  /// `CURLOPT_AWS_SIGV4`, e.g. `aws:amz:us-east-1:s3`.
  var signature: String
  var accessKey: String
  var secretKey: String
  var connectTimeoutMilliseconds: Int
  /// A transfer slower than 1 byte/s for this long is a timeout (no total limit: 1 GiB may take a while).
  /// 0: no stall limit.
  var stallTimeoutSeconds: Int
  /// A limit on the whole exchange; 0: none.
  var totalTimeoutMilliseconds = 0
  /// Refuse any scheme but http and https (a URL not chosen by this server, e.g. a webhook's).
  var webProtocolsOnly = false
}

/// What came back: the final status, the headers of the final response (names lowercased), and
/// the body when it was not streamed to a consumer (an error body, or XML), capped.
struct CurlResponse {
  var status: Int
  var headers: [String: String]
  var body: [UInt8]
}

/// A failure below HTTP: libcurl's code, its message, and which kind of trouble it is.
struct CurlFailure: Error {
  enum Kind { case unreachable, timeout, transport }
  var kind: Kind
  var code: UInt32
  var message: String
}

/// Owns one libcurl easy handle; frees it in `deinit`.
///
/// A handle keeps its connections open between requests, so ``S3Client`` pools them. It is
/// used by one thread at a time (checked out of the pool for a call), hence `@unchecked`.
final class CurlEasy: @unchecked Sendable {
  private let handle: UnsafeMutableRawPointer
  private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)

  /// Bodies not streamed to a consumer are kept up to this size (XML listings, error documents).
  static let bufferedBodyLimit = 16 << 20

  private static let globalInit: Void = { _ = curl_global_init(Int(CURL_GLOBAL_ALL)) }()

  /// Whether this libcurl orders the headers it signs by name, as SigV4 wants: from 8.10.0 on
  /// (curl commit cf3e3d9, "aws_sigv4: fix canon order for headers with same prefix"). Earlier
  /// ones sort whole `name:value` lines, so `x-amz-copy-source-range` comes before
  /// `x-amz-copy-source` ('-' sorts before ':') and the store refuses the signature: a ranged
  /// UploadPartCopy cannot be signed with them (Debian 12 ships 7.88.1).
  static let sortsSignedHeadersByName: Bool = {
    guard let info = curl_version_info(CURLVERSION_FIRST) else { return false }
    return info.pointee.version_num >= 0x08_0a_00
  }()

  init() {
    _ = CurlEasy.globalInit
    guard let h = curl_easy_init() else { fatalError("curl_easy_init: out of memory") }
    handle = h
  }

  deinit {
    curl_easy_cleanup(handle)
    errorBuffer.deallocate()
  }

  /// Performs `exchange`. When `stream` is given and the status is 2xx, body bytes go to it as
  /// they arrive (at most libcurl's buffer at a time) and are not kept; `onResponse` sees the
  /// status and headers before the first byte.
  ///
  /// - Throws: `CurlFailure` below HTTP, or whatever `stream`/`onResponse` threw.
  func perform(
    _ exchange: CurlExchange,
    onResponse: ((Int, [String: String]) throws -> Void)? = nil,
    stream: ((UnsafeRawBufferPointer) throws -> Void)? = nil
  ) throws -> CurlResponse {
    curl_easy_reset(handle)
    let transfer = Transfer(handle: handle, body: exchange.body, onResponse: onResponse, stream: stream)
    defer { transfer.close() }
    if case .file(let path, _, _) = exchange.body {
      transfer.fd = open(path, O_RDONLY | O_CLOEXEC)
      if transfer.fd < 0 {
        throw CurlFailure(
          kind: .transport, code: 0, message: "open \(path): \(String(cString: strerror(errno)))")
      }
    }
    var headerList: UnsafeMutablePointer<curl_slist>? = nil
    defer { curl_slist_free_all(headerList) }
    // libcurl adds `Expect: 100-continue` to large bodies (after signing): a refusal (bad
    // credentials, a missing bucket) then comes back before the body is sent. Removing it with
    // an empty `Expect:` would not do: libcurl 7.88 signs the empty header it does not send.
    for header in exchange.headers { headerList = curl_slist_append(headerList, header) }

    errorBuffer[0] = 0
    let context = Unmanaged.passUnretained(transfer).toOpaque()
    try set(CURLOPT_URL, exchange.url)
    try set(CURLOPT_NOSIGNAL, 1)
    if !exchange.signature.isEmpty {
      try set(CURLOPT_AWS_SIGV4, exchange.signature)
      try set(CURLOPT_USERNAME, exchange.accessKey)
      try set(CURLOPT_PASSWORD, exchange.secretKey)
    }
    if exchange.totalTimeoutMilliseconds > 0 { try set(CURLOPT_TIMEOUT_MS, exchange.totalTimeoutMilliseconds) }
    if exchange.webProtocolsOnly { try set(CURLOPT_PROTOCOLS_STR, "http,https") }
    try check(larder_curl_set_slist(handle, CURLOPT_HTTPHEADER, headerList))
    try check(larder_curl_set_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer))
    try set(CURLOPT_CONNECTTIMEOUT_MS, exchange.connectTimeoutMilliseconds)
    if exchange.stallTimeoutSeconds > 0 {
      try set(CURLOPT_LOW_SPEED_LIMIT, 1)
      try set(CURLOPT_LOW_SPEED_TIME, exchange.stallTimeoutSeconds)
    }
    // Large buffers only for transfers that fill them: after a reset libcurl allocates them anew
    // for every transfer (fresh pages each time), a cost a webhook's or a small object's
    // exchange would pay for nothing.
    if stream != nil { try set(CURLOPT_BUFFERSIZE, 256 << 10) }
    try check(larder_curl_set_data_callback(handle, CURLOPT_HEADERFUNCTION, curlHeaderCallback))
    try check(larder_curl_set_pointer(handle, CURLOPT_HEADERDATA, context))
    try check(larder_curl_set_data_callback(handle, CURLOPT_WRITEFUNCTION, curlWriteCallback))
    try check(larder_curl_set_pointer(handle, CURLOPT_WRITEDATA, context))
    switch exchange.method {
    case "GET": try set(CURLOPT_HTTPGET, 1)
    case "HEAD": try set(CURLOPT_NOBODY, 1)
    case "PUT":
      try set(CURLOPT_UPLOAD, 1)
      try check(larder_curl_set_offset(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(exchange.body.length)))
    case "POST":
      try set(CURLOPT_POST, 1)
      try check(larder_curl_set_offset(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(exchange.body.length)))
    default: try set(CURLOPT_CUSTOMREQUEST, exchange.method)
    }
    // A POST's body in memory goes out from there: libcurl then sends a small one in the same
    // `send` as the head (through a read callback it sends the head, polls, then the body: two
    // segments and two wake-ups of the receiver per webhook delivery).
    var inline: [UInt8]? = nil
    if exchange.method == "POST", case .bytes(let bytes) = exchange.body, !bytes.isEmpty {
      inline = bytes
    } else if exchange.method == "PUT" || exchange.method == "POST" {
      try check(larder_curl_set_data_callback(handle, CURLOPT_READFUNCTION, curlReadCallback))
      try check(larder_curl_set_pointer(handle, CURLOPT_READDATA, context))
      if exchange.body.length >= 512 << 10 { try set(CURLOPT_UPLOAD_BUFFERSIZE, 512 << 10) }
    }

    let code: CURLcode
    if let inline {
      code = try inline.withUnsafeBytes { bytes throws -> CURLcode in
        // libcurl reads the bytes during `perform` only, while this closure keeps them alive.
        try check(larder_curl_set_pointer(handle, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress)))
        return curl_easy_perform(handle)
      }
    } else {
      code = curl_easy_perform(handle)
    }
    if let error = transfer.callbackError { throw error }
    guard code == CURLE_OK else { throw failure(code) }
    try transfer.responseBegins()  // a response without a body (HEAD, 204, an empty object)
    var status = 0
    try check(larder_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &status))
    return CurlResponse(status: status, headers: transfer.headers, body: transfer.buffered)
  }

  private func set(_ option: CURLoption, _ value: Int) throws {
    try check(larder_curl_set_long(handle, option, value))
  }

  private func set(_ option: CURLoption, _ value: String) throws {
    try check(larder_curl_set_string(handle, option, value))
  }

  private func check(_ code: CURLcode) throws {
    guard code == CURLE_OK else { throw failure(code) }
  }

  private func failure(_ code: CURLcode) -> CurlFailure {
    let detail = String(cString: errorBuffer)
    let message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
    let kind: CurlFailure.Kind =
      switch code {
      case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: .unreachable
      case CURLE_OPERATION_TIMEDOUT: .timeout
      default: .transport
      }
    return CurlFailure(kind: kind, code: code.rawValue, message: message)
  }
}

/// The state libcurl's callbacks share during one `perform`.
private final class Transfer {
  let handle: UnsafeMutableRawPointer
  let body: S3Body
  let onResponse: ((Int, [String: String]) throws -> Void)?
  let stream: ((UnsafeRawBufferPointer) throws -> Void)?
  var fd: Int32 = -1
  var sent: Int64 = 0
  var headers: [String: String] = [:]
  var buffered: [UInt8] = []
  var status: Int?
  var streaming = false
  var callbackError: (any Error)?

  init(
    handle: UnsafeMutableRawPointer, body: S3Body,
    onResponse: ((Int, [String: String]) throws -> Void)?, stream: ((UnsafeRawBufferPointer) throws -> Void)?
  ) {
    self.handle = handle
    self.body = body
    self.onResponse = onResponse
    self.stream = stream
  }

  func close() {
    if fd >= 0 { _ = Foundation.close(fd) }
    fd = -1
  }

  /// Called once, before the first body byte (or at the end when there is none).
  func responseBegins() throws {
    guard status == nil else { return }
    var code = 0
    _ = larder_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &code)
    status = code
    streaming = stream != nil && (200..<300).contains(code)
    if (200..<300).contains(code) { try onResponse?(code, headers) }
  }

  func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
    let remaining = body.length - sent
    let count = Int(min(Int64(buffer.count), remaining))
    guard count > 0 else { return 0 }
    switch body {
    case .empty: return 0
    case .bytes(let bytes):
      bytes.withUnsafeBytes { source in
        buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[Int(sent)..<Int(sent) + count]))
      }
    case .file(let path, let offset, _):
      let n = pread(fd, buffer.baseAddress, count, off_t(offset + sent))
      if n <= 0 {
        let reason = n < 0 ? String(cString: strerror(errno)) : "the file is shorter than announced"
        callbackError = CurlFailure(kind: .transport, code: 0, message: "read \(path): \(reason)")
        return larder_curl_read_abort()
      }
      sent += Int64(n)
      return n
    }
    sent += Int64(count)
    return count
  }

  /// One header line as curl hands it over (CRLF included). Read as bytes: Foundation's
  /// `trimmingCharacters` bridged through NSString was a tenth of a webhook delivery's CPU.
  func header(_ line: UnsafeRawBufferPointer) {
    func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }
    func trimmed(_ r: Range<Int>) -> Range<Int> {
      var (lo, hi) = (r.lowerBound, r.upperBound)
      while lo < hi, isSpace(line[lo]) { lo += 1 }
      while hi > lo, isSpace(line[hi - 1]) { hi -= 1 }
      return lo..<hi
    }
    let text = trimmed(0..<line.count)
    if line[text].starts(with: "HTTP/".utf8) {
      headers = [:]  // a new response (after a 100 Continue, a redirect)
      return
    }
    guard let colon = line[text].firstIndex(of: 0x3A) else { return }
    let name = line[text.lowerBound..<colon].map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
    let value = UnsafeRawBufferPointer(rebasing: line[trimmed(colon + 1..<text.upperBound)])
    headers[String(decoding: name, as: UTF8.self)] = String(decoding: value, as: UTF8.self)
  }

  func write(_ chunk: UnsafeRawBufferPointer) -> Bool {
    do {
      try responseBegins()
      if streaming, let stream {
        try stream(chunk)
      } else if buffered.count + chunk.count <= CurlEasy.bufferedBodyLimit {
        buffered.append(contentsOf: chunk)
      }
      return true
    } catch {
      callbackError = error
      return false
    }
  }
}

private func transferOf(_ context: UnsafeMutableRawPointer?) -> Transfer {
  Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
}

private let curlReadCallback: larder_curl_data_callback = { buffer, size, count, context in
  transferOf(context).read(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
}

private let curlHeaderCallback: larder_curl_data_callback = { buffer, size, count, context in
  transferOf(context).header(UnsafeRawBufferPointer(start: buffer, count: size * count))
  return size * count
}

private let curlWriteCallback: larder_curl_data_callback = { buffer, size, count, context in
  // Returning less than was given makes libcurl stop with CURLE_WRITE_ERROR.
  transferOf(context).write(UnsafeRawBufferPointer(start: buffer, count: size * count)) ? size * count : 0
}
