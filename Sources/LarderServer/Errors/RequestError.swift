/// A request an endpoint refuses on its headers alone, with a stable `code`; ``APIError``
/// gives each its status (and the headers the protocol asks for).
public enum RequestError: Error, Sendable, Equatable {
  /// A header or query value is malformed (400).
  case badRequest(String)
  /// A simple upload without `Content-Length` or chunked encoding (411).
  case lengthRequired
  /// The upload is larger than the service's limit (413).
  case uploadTooLarge(limit: Int64)
  /// tus: `Tus-Resumable` is missing or names another version (412, with `Tus-Version`).
  case unsupportedTusVersion(supported: String)
  /// tus: a `PATCH` body that is not `application/offset+octet-stream` (415).
  case unsupportedMediaType(expected: String)

  public var code: String {
    switch self {
    case .badRequest: "bad-request"
    case .lengthRequired: "length-required"
    case .uploadTooLarge: "upload-too-large"
    case .unsupportedTusVersion: "unsupported-tus-version"
    case .unsupportedMediaType: "unsupported-media-type"
    }
  }

  public var message: String {
    switch self {
    case .badRequest(let message): message
    case .lengthRequired: "Content-Length is required"
    case .uploadTooLarge(let limit): "the upload is larger than the limit of \(limit) bytes"
    case .unsupportedTusVersion(let version): "Tus-Resumable must be \(version)"
    case .unsupportedMediaType(let expected): "Content-Type must be \(expected)"
    }
  }
}
