import Foundation
import LarderCrypto
import Synchronization

/// A client for one bucket of an S3-compatible store (AWS S3, MinIO, Ceph RGW, OpenStack Swift,
/// Garage), over libcurl, which signs every request itself (`CURLOPT_AWS_SIGV4`).
///
/// Every PUT carries `x-amz-content-sha256` = the SHA-256 of its body, which the store checks:
/// for a content-addressed store that hash is already known, so S3's integrity check is free.
/// Calls block the calling thread; they may run on many threads at once (each borrows an easy
/// handle, whose open connections are reused, from a small pool).
///
/// ```swift
/// let s3 = S3Client(configuration: try S3Configuration(url: "s3://larder?endpoint=http://127.0.0.1:18080"),
///                   credentials: try S3Credentials.resolve())
/// try s3.putFile(atPath: tmp, key: "sha256/ab/cd/abcd…", sha256Hex: "abcd…")
/// try s3.get("sha256/ab/cd/abcd…") { chunk in write(chunk) }
/// ```
public final class S3Client: Sendable {
  /// Sizes, attempts and timeouts; the defaults suit a store on a LAN or in the same region.
  public struct Tuning: Sendable {
    /// Content larger than this goes up as a multipart upload.
    public var multipartThreshold: Int64 = 16 << 20
    /// The size of each part but the last (S3 wants at least 5 MiB).
    public var partSize: Int64 = 16 << 20
    /// Attempts of one idempotent request (a PUT, a part, HEAD, DELETE, a listing page) before
    /// its transient failure is reported; waits 100 ms, 200 ms… in between.
    public var attempts = 3
    public var connectTimeoutMilliseconds = 3000
    /// A transfer that moves no byte for this long fails as a timeout.
    public var stallTimeoutSeconds = 30
    /// Easy handles kept open between calls (each holds its connections).
    public var idleHandles = 8
    /// Objects larger than this are copied in parts (UploadPartCopy, ``partSize`` each) rather
    /// than by one CopyObject, which S3 allows up to 5 GiB; tests lower it to reach that path.
    public var copyMultipartThreshold: Int64 = 5 << 30

    public init() {}
  }

  public let configuration: S3Configuration
  public let tuning: Tuning
  private let credentials: S3Credentials
  private let pool = Mutex<[CurlEasy]>([])

  /// SHA-256 of nothing: the payload hash of GET, HEAD, DELETE.
  static let emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

  public init(configuration: S3Configuration, credentials: S3Credentials, tuning: Tuning = Tuning()) {
    precondition(tuning.partSize >= 5 << 20, "S3 parts are at least 5 MiB")
    self.configuration = configuration
    self.credentials = credentials
    self.tuning = tuning
  }

  // MARK: Objects

  /// Stores `length` bytes of the file at `path` (all of it when nil) as `key`; content over
  /// ``Tuning/multipartThreshold`` goes up in parts, each retried, the upload aborted on failure.
  ///
  /// - Parameter sha256Hex: the content's SHA-256 (lowercase hex); the store refuses the
  ///   content (`400 BadDigest`) if it does not match. For a multipart upload each part is
  ///   hashed and checked on its own; the whole is what the caller staged and hashed.
  /// - Returns: the object's ETag.
  /// - Throws: ``S3Error``.
  @discardableResult
  public func putFile(atPath path: String, key: String, sha256Hex: String) throws -> String {
    var info = stat()
    guard stat(path, &info) == 0 else {
      throw S3Error(
        .local, operation: "PutObject", key: key, detail: "stat \(path): \(String(cString: strerror(errno)))")
    }
    let size = Int64(info.st_size)
    if size <= tuning.multipartThreshold {
      return try put(.file(path: path, offset: 0, length: size), key: key, sha256Hex: sha256Hex)
    }
    let uploadID = try createMultipartUpload(key: key)
    do {
      var parts: [S3Part] = []
      var offset: Int64 = 0
      while offset < size {
        let length = min(tuning.partSize, size - offset)
        parts.append(
          try uploadPart(
            key: key, uploadID: uploadID, number: parts.count + 1,
            body: .file(path: path, offset: offset, length: length)))
        offset += length
      }
      return try completeMultipartUpload(key: key, uploadID: uploadID, parts: parts)
    } catch {
      try? abortMultipartUpload(key: key, uploadID: uploadID)
      throw error
    }
  }

  /// Stores `body` as `key` in one PUT (at most 5 GiB), retried on transient failures.
  ///
  /// - Parameter sha256Hex: the body's SHA-256; computed here when nil.
  /// - Returns: the object's ETag.
  /// - Throws: ``S3Error``.
  @discardableResult
  public func put(_ body: S3Body, key: String, sha256Hex: String? = nil) throws -> String {
    let hash = try sha256Hex ?? Self.sha256Hex(of: body, operation: "PutObject", key: key)
    let response = try request(
      "PUT", operation: "PutObject", key: key, headers: ["Content-Type: application/octet-stream"],
      body: body,
      payloadHash: hash, retried: true)
    return response.headers["etag"]?.unquoted ?? ""
  }

  /// The object's size and ETag; nil when there is no such key.
  ///
  /// - Throws: ``S3Error`` (a 403 has no error code: HEAD answers carry no body).
  public func head(_ key: String) throws -> S3ObjectHead? {
    do {
      let response = try request("HEAD", operation: "HeadObject", key: key, retried: true)
      return Self.objectHead(response.headers)
    } catch let error as S3Error where error.status == 404 {
      return nil
    }
  }

  /// Streams the object (or `range` of it, inclusive offsets) to `body`, a chunk of at most a
  /// few hundred KiB at a time: nothing is buffered beyond that, and a slow `body` slows the
  /// transfer. `onResponse` sees the size and ETag before the first byte. Not retried: bytes
  /// may already have been delivered.
  ///
  /// - Throws: ``S3Error`` (404 `NoSuchKey`, 416 `InvalidRange`…), or what `body` threw.
  @discardableResult
  public func get(
    _ key: String, range: ClosedRange<Int64>? = nil, onResponse: (S3ObjectHead) throws -> Void = { _ in },
    body: (UnsafeRawBufferPointer) throws -> Void
  ) throws -> S3ObjectHead {
    var headers: [String] = []
    if let range { headers.append("Range: bytes=\(range.lowerBound)-\(range.upperBound)") }
    // The closures live only as long as this call; libcurl's callbacks reach them through a
    // context object, which the type system cannot see is as short-lived.
    return try withoutActuallyEscaping(onResponse) { onResponse in
      try withoutActuallyEscaping(body) { body in
        let response = try request(
          "GET", operation: "GetObject", key: key, headers: headers,
          onResponse: { _, h in try onResponse(Self.objectHead(h)) }, stream: body)
        return Self.objectHead(response.headers)
      }
    }
  }

  /// Removes `key`; removing a missing key succeeds too (S3 answers 204 either way, some
  /// stores 404), so a collector that is interrupted can simply run again.
  ///
  /// - Throws: ``S3Error``.
  public func delete(_ key: String) throws {
    do {
      _ = try request("DELETE", operation: "DeleteObject", key: key, retried: true)
    } catch let error as S3Error where error.status == 404 && error.code != "NoSuchBucket" {
    }
  }

  /// One page of ListObjectsV2 under `prefix`, in key order.
  ///
  /// - Throws: ``S3Error``.
  public func listPage(prefix: String = "", continuationToken: String? = nil, maxKeys: Int = 1000) throws
    -> S3ListPage
  {
    var query = [("list-type", "2"), ("max-keys", String(maxKeys)), ("prefix", prefix)]
    if let continuationToken { query.append(("continuation-token", continuationToken)) }
    let response = try request("GET", operation: "ListObjectsV2", key: nil, query: query, retried: true)
    let root = try Self.document(
      response, operation: "ListObjectsV2", key: prefix, expecting: "ListBucketResult")
    var objects: [S3ObjectSummary] = []
    for entry in root.children("Contents") {
      guard let key = entry["Key"], let size = entry["Size"].flatMap(Int64.init) else {
        throw S3Error(
          .invalidResponse, operation: "ListObjectsV2", key: prefix, detail: "an entry lacks Key or Size")
      }
      objects.append(
        S3ObjectSummary(
          key: key, size: size, etag: entry["ETag"]?.unquoted ?? "",
          lastModified: entry["LastModified"].flatMap(Self.parseTimestamp)))
    }
    let truncated = root["IsTruncated"] == "true"
    let next = root["NextContinuationToken"].flatMap { $0.isEmpty ? nil : $0 }
    if truncated && next == nil {
      throw S3Error(
        .invalidResponse, operation: "ListObjectsV2", key: prefix,
        detail: "truncated without NextContinuationToken")
    }
    return S3ListPage(objects: objects, continuationToken: truncated ? next : nil)
  }

  /// An ISO 8601 timestamp as S3 writes them (`2026-11-30T19:54:02.000Z`, fractions optional).
  static func parseTimestamp(_ text: String) -> Date? {
    let withFraction = ISO8601DateFormatter()
    withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return withFraction.date(from: text) ?? ISO8601DateFormatter().date(from: text)
  }

  /// Every object under `prefix`, page by page (`pageSize` keys per request), so memory stays
  /// bounded however large the bucket.
  ///
  /// - Throws: ``S3Error``, or what `each` threw.
  public func list(prefix: String = "", pageSize: Int = 1000, _ each: (S3ObjectSummary) throws -> Void) throws
  {
    var token: String? = nil
    repeat {
      let page = try listPage(prefix: prefix, continuationToken: token, maxKeys: pageSize)
      for object in page.objects { try each(object) }
      token = page.continuationToken
    } while token != nil
  }

  // MARK: Requests

  /// Performs one signed request, retrying transient failures when `retried` (idempotent
  /// requests only), and turns every non-2xx answer into an ``S3Error``.
  func request(
    _ method: String, operation: String, key: String?, query: [(String, String)] = [], headers: [String] = [],
    body: S3Body = .empty, payloadHash: String = S3Client.emptySHA256, retried: Bool = false,
    onResponse: ((Int, [String: String]) throws -> Void)? = nil,
    stream: ((UnsafeRawBufferPointer) throws -> Void)? = nil
  ) throws -> CurlResponse {
    var all = headers + ["x-amz-content-sha256: \(payloadHash)"]
    if let token = credentials.sessionToken { all.append("x-amz-security-token: \(token)") }
    let exchange = CurlExchange(
      method: method, url: configuration.url(key: key, query: query), headers: all, body: body,
      signature: "aws:amz:\(configuration.region):s3", accessKey: credentials.accessKeyID,
      secretKey: credentials.secretAccessKey, connectTimeoutMilliseconds: tuning.connectTimeoutMilliseconds,
      stallTimeoutSeconds: tuning.stallTimeoutSeconds)
    return try retrying(retried) {
      try once(exchange, operation: operation, key: key, onResponse: onResponse, stream: stream)
    }
  }

  /// Runs `attempt` up to ``Tuning/attempts`` times while it throws a transient ``S3Error``
  /// (once when not `retried`), waiting 100 ms, 200 ms… in between.
  func retrying<T>(_ retried: Bool, _ attempt: () throws -> T) throws -> T {
    var number = 1
    while true {
      do {
        return try attempt()
      } catch let error as S3Error where retried && error.isTransient && number < tuning.attempts {
        usleep(useconds_t(100_000 << (number - 1)))
        number += 1
      }
    }
  }

  private func once(
    _ exchange: CurlExchange, operation: String, key: String?,
    onResponse: ((Int, [String: String]) throws -> Void)?, stream: ((UnsafeRawBufferPointer) throws -> Void)?
  ) throws -> CurlResponse {
    let easy = pool.withLock { $0.popLast() } ?? CurlEasy()
    let response: CurlResponse
    do {
      response = try easy.perform(exchange, onResponse: onResponse, stream: stream)
    } catch let failure as CurlFailure {
      // A handle that failed below HTTP may hold a broken connection: let it go.
      let kind: S3Error.Kind =
        switch failure.kind {
        case .unreachable: .unreachable
        case .timeout: .timeout
        case .transport: failure.code == 0 ? .local : .transport(curlCode: failure.code)
        }
      throw S3Error(kind, operation: operation, key: key, detail: failure.message)
    }
    pool.withLock { idle in if idle.count < tuning.idleHandles { idle.append(easy) } }
    guard (200..<300).contains(response.status) else {
      let error = S3XMLElement.parse(response.body)
      throw S3Error(
        .http(status: response.status, code: error?["Code"], message: error?["Message"]),
        operation: operation,
        key: key)
    }
    return response
  }

  /// The XML document of a 2xx answer, whose root must be `expecting`. CompleteMultipartUpload
  /// may answer 200 and then an `<Error>`: that is an error.
  static func document(_ response: CurlResponse, operation: String, key: String?, expecting: String) throws
    -> S3XMLElement
  {
    guard let root = S3XMLElement.parse(response.body) else {
      throw S3Error(.invalidResponse, operation: operation, key: key, detail: "not XML")
    }
    if root.name == "Error" {
      throw S3Error(
        .http(status: response.status, code: root["Code"], message: root["Message"]), operation: operation,
        key: key)
    }
    guard root.name == expecting else {
      throw S3Error(
        .invalidResponse, operation: operation, key: key,
        detail: "expected <\(expecting)>, got <\(root.name)>")
    }
    return root
  }

  static func objectHead(_ headers: [String: String]) -> S3ObjectHead {
    S3ObjectHead(
      size: headers["content-length"].flatMap(Int64.init) ?? 0, etag: headers["etag"]?.unquoted ?? "",
      contentRange: headers["content-range"])
  }

  /// The SHA-256 of a body, reading a file range in 1 MiB slices.
  static func sha256Hex(of body: S3Body, operation: String, key: String) throws -> String {
    try digestsHex(of: body, [.sha256], operation: operation, key: key)[0]
  }

  /// The SHA-256 (what every request is signed with) and the MD5 (what S3 makes a part's ETag
  /// of) of a body, in one read of it: a resumable upload's part is checked end to end with
  /// its MD5 (``completeMultipartUpload(key:uploadID:parts:)``'s ETag) at no second read.
  /// - Throws: ``S3Error`` (`.local`) when a file body cannot be read.
  public static func sha256AndMD5Hex(of body: S3Body) throws -> (sha256: String, md5: String) {
    let hex = try digestsHex(of: body, [.sha256, .md5], operation: "UploadPart", key: "")
    return (hex[0], hex[1])
  }

  private static func digestsHex(
    of body: S3Body, _ algorithms: [DigestAlgorithm], operation: String, key: String
  )
    throws -> [String]
  {
    let digests = algorithms.map { Digest($0) }
    switch body {
    case .empty: break
    case .bytes(let bytes): for digest in digests { digest.update(bytes) }
    case .file(let path, let offset, let length):
      let fd = open(path, O_RDONLY | O_CLOEXEC)
      guard fd >= 0 else {
        throw S3Error(
          .local, operation: operation, key: key, detail: "open \(path): \(String(cString: strerror(errno)))")
      }
      defer { close(fd) }
      var buffer = [UInt8](repeating: 0, count: 1 << 20)
      var done: Int64 = 0
      while done < length {
        let want = Int(min(Int64(buffer.count), length - done))
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(offset + done)) }
        guard n > 0 else {
          throw S3Error(.local, operation: operation, key: key, detail: "read \(path): short or failed")
        }
        buffer.withUnsafeBytes { bytes in
          for digest in digests { digest.update(UnsafeRawBufferPointer(rebasing: bytes[0..<n])) }
        }
        done += Int64(n)
      }
    }
    return digests.map { Hex.encode($0.finalize()) }
  }

}
