import Foundation
import Larder
import LarderAuth
import LarderHTTP

/// The one place where errors become HTTP statuses.
///
/// A 500 never carries the underlying error's text; it is logged instead.
enum APIError {
  static func response(for error: any Error) -> HTTPResponse {
    switch error {
    case let e as HTTPResponseError:
      return e.response
    case let e as HTTPRequestError:
      return .error(status: e.status, message: e.message)
    case let e as LarderError:
      return larder(e)
    case let e as UploadError:
      return upload(e)
    case let e as AuthError:
      var r = HTTPResponse.error(status: 401, message: e.message)
      r.headers.add("WWW-Authenticate", "Bearer")
      return r
    case let e as DatabaseError:
      if e.isDiskFull { return .error(status: 507, message: "no space left on the storage device") }
      if e.isBusy { return retryLater("the catalog is busy; retry") }
      logInternal(e)
      return .error(status: 500, message: "internal error")
    default:
      logInternal(error)
      return .error(status: 500, message: "internal error")
    }
  }

  static func larder(_ e: LarderError) -> HTTPResponse {
    switch e {
    case .notFound, .fileNotFound: return .error(status: 404, message: e.description)
    case .invalidBucket, .invalidName, .invalidArgument, .checksumMismatch:
      return .error(status: 400, message: e.description)
    case .sizeLimitExceeded: return .error(status: 413, message: e.description)
    case .downloadSizeExceeded(let size, let maxSize):
      return .error(status: 413, message: e.description, extra: ["size": size, "maxSize": maxSize])
    case .preconditionFailed: return .error(status: 412, message: e.description)
    case .diskFull: return .error(status: 507, message: e.description)
    case .corruptContent: return .error(status: 500, message: e.description)
    case .cancelled: return .error(status: 499, message: e.description)
    case .io, .catalogTooNew:
      logInternal(e)
      return .error(status: 500, message: "internal error")
    }
  }

  static func upload(_ e: UploadError) -> HTTPResponse {
    let status: Int =
      switch e {
      case .notFound: 404
      case .expired, .dataLost: 410
      case .locked: 423
      case .offsetMismatch: 409
      case .exceedsLength: 413
      case .invalidLength, .invalidConcatenation: 400
      case .finalNotAppendable: 403
      case .checksumMismatch: 460  // tus's status for a chunk whose checksum does not match
      }
    return .error(status: status, message: e.description)
  }

  static func forbidden() -> HTTPResponse {
    .error(status: 403, message: "permission denied")
  }

  static func retryLater(_ message: String) -> HTTPResponse {
    var r = HTTPResponse.error(status: 503, message: message)
    r.headers.add("Retry-After", "1")
    return r
  }

  static func logInternal(_ error: any Error) {
    FileHandle.standardError.write(Data("larder: internal error: \(error)\n".utf8))
  }
}
