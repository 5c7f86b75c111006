/// A failed S3 call, as a value: what kind of failure, which operation and key, and what the
/// store said.
///
/// ```swift
/// do { try client.putFile(atPath: p, key: k, sha256Hex: h) }
/// catch let e as S3Error where e.isTransient { /* answer 503, let the client retry */ }
/// ```
public struct S3Error: Error, Sendable, Equatable, CustomStringConvertible {
  public enum Kind: Sendable, Equatable {
    /// The endpoint could not be reached (connection refused, name not resolved).
    case unreachable
    /// Connecting or the transfer took too long.
    case timeout
    /// The connection failed mid-request (reset, closed early); `curlCode` is libcurl's.
    case transport(curlCode: UInt32)
    /// The store answered with an HTTP error; `code` and `message` come from its XML `<Error>`
    /// document when there was one (HEAD answers have none).
    case http(status: Int, code: String?, message: String?)
    /// The store answered 2xx with something this client cannot read.
    case invalidResponse
    /// A local problem before anything was sent (an unreadable file).
    case local
  }

  public var kind: Kind
  /// The S3 operation, e.g. `PutObject`, `UploadPart`, `ListObjectsV2`.
  public var operation: String
  /// The object key the request was about, when there was one.
  public var key: String?
  /// libcurl's message or a short explanation.
  public var detail: String

  public init(_ kind: Kind, operation: String, key: String?, detail: String = "") {
    self.kind = kind
    self.operation = operation
    self.key = key
    self.detail = detail
  }

  /// The HTTP status, when the store answered.
  public var status: Int? {
    if case .http(let status, _, _) = kind { status } else { nil }
  }

  /// The S3 error code (`NoSuchKey`, `BadDigest`, `SignatureDoesNotMatch`…), when there was one.
  public var code: String? {
    if case .http(_, let code, _) = kind { code } else { nil }
  }

  /// Whether trying again later may succeed: the store was unreachable, slow, overloaded or
  /// failing (5xx, 429, S3's `RequestTimeout`/`SlowDown`/`InternalError`, the last also when it
  /// comes inside a 200, as a copy may answer); never for a refusal (4xx) of the request.
  public var isTransient: Bool {
    switch kind {
    case .unreachable, .timeout, .transport: true
    case .http(let status, let code, _):
      status >= 500 || status == 429 || code == "RequestTimeout" || code == "SlowDown"
        || code == "InternalError"
    case .invalidResponse, .local: false
    }
  }

  public var description: String {
    let subject = key.map { "\(operation) \($0)" } ?? operation
    switch kind {
    case .unreachable: return "S3 \(subject): endpoint unreachable: \(detail)"
    case .timeout: return "S3 \(subject): timed out: \(detail)"
    case .transport(let code): return "S3 \(subject): connection failed (curl \(code)): \(detail)"
    case .http(let status, let code, let message):
      return "S3 \(subject): HTTP \(status)\(code.map { " \($0)" } ?? "")\(message.map { ": \($0)" } ?? "")"
    case .invalidResponse: return "S3 \(subject): unreadable answer: \(detail)"
    case .local: return "S3 \(subject): \(detail)"
    }
  }
}
