import Foundation
import Larder
import LarderImages
import LarderAuth
import LarderHTTP
import LarderLogging

/// The one place where errors become HTTP statuses: the ``Router``'s `errorMapper`.
///
/// What the client must not read (a policy's reason, an internal error's text) is logged here
/// with the request id instead; every refusal with a stable code is logged with that code.
/// The JSON shape is the API's: Firebase's, or GCS's for the GCS JSON API's paths.
enum APIError {
  static func response(for error: any Error, request: HTTPRequest, logger: Logger) -> HTTPResponse {
    let response = firebaseShaped(error, request: request, logger: logger)
    return GcsAPI.owns(request) ? GcsAPI.reshapeError(response) : response
  }

  private static func firebaseShaped(_ error: any Error, request: HTTPRequest, logger: Logger) -> HTTPResponse {
    let log = logger.with(["request_id": request.id])
    switch error {
    case let e as HTTPResponseError:
      return e.response
    case let e as HTTPRequestError:
      return .error(status: e.status, message: e.message)
    case let e as AccessError:
      switch e {
      case .denied(let reason):
        log.info("access denied", metadata: ["code": e.code, "reason": reason])
        return .error(status: 403, message: "permission denied")
      }
    case let e as RequestError:
      return requestError(e)
    case let e as LarderError:
      return larder(e, log: log)
    case let e as UploadError:
      log.info("upload refused", metadata: ["code": e.code])
      return upload(e)
    case let e as QuotaError:
      log.info("write quota refused", metadata: ["code": e.code])
      var r = HTTPResponse.error(status: 429, message: e.message)
      r.headers.set("Retry-After", String(e.retryAfter))
      return r
    case let e as ImageError:
      log.info("image variant refused", metadata: ["code": e.code])
      return image(e)
    case let e as SignedURLError:
      log.info("signed URL refused", metadata: ["code": e.code])
      if case .malformed = e { return .error(status: 400, message: e.message) }
      return .error(status: 403, message: e.message)
    case let e as AuthError:
      var r = HTTPResponse.error(status: 401, message: e.message)
      r.headers.add("WWW-Authenticate", "Bearer")
      return r
    case let e as DatabaseError:
      if e.isDiskFull { return .error(status: 507, message: "no space left on the storage device") }
      if e.isBusy { return retryLater("the catalog is busy; retry") }
      if e.isConnectionLost { return retryLater("the catalog is unreachable; retry") }
      log.error("internal error: \(e)")
      return .error(status: 500, message: "internal error")
    default:
      log.error("internal error: \(error)")
      return .error(status: 500, message: "internal error")
    }
  }

  static func requestError(_ e: RequestError) -> HTTPResponse {
    switch e {
    case .badRequest: return .error(status: 400, message: e.message)
    case .lengthRequired: return .error(status: 411, message: e.message)
    case .uploadTooLarge: return .error(status: 413, message: e.message)
    case .unsupportedMediaType: return .error(status: 415, message: e.message)
    case .unsupportedTusVersion(let version):
      var r = HTTPResponse.error(status: 412, message: e.message)
      r.headers.set("Tus-Version", version)
      return r
    }
  }

  static func larder(_ e: LarderError, log: Logger) -> HTTPResponse {
    switch e {
    case .notFound, .fileNotFound, .eventNotFound: return .error(status: 404, message: e.description)
    case .invalidBucket, .invalidName, .invalidArgument, .checksumMismatch:
      return .error(status: 400, message: e.description)
    case .sizeLimitExceeded: return .error(status: 413, message: e.description)
    case .downloadSizeExceeded(let size, let maxSize):
      return .error(status: 413, message: e.description, extra: ["size": size, "maxSize": maxSize])
    case .preconditionFailed: return .error(status: 412, message: e.description)
    case .diskFull: return .error(status: 507, message: e.description)
    case .corruptContent:
      // 410, not a 5xx: the SDKs retry those for minutes, and no retry brings damaged bytes
      // back; only an upload does (the message says so). The object's metadata still answers.
      log.error("corrupt content: \(e)")
      return .error(status: 410, message: e.description)
    case .contentMissing:
      log.error("missing content: \(e)")
      return .error(status: 500, message: e.description)
    case .cancelled: return .error(status: 499, message: e.description)
    case .io(_, _, let errno) where [EMFILE, ENFILE, ENOMEM, ENOBUFS].contains(errno):
      // Out of descriptors or memory is the server's load, not a fault: the client may retry.
      log.warning("out of resources: \(e)")
      return retryLater("the server is out of resources; retry")
    case .blobStoreUnavailable:
      // S3 unreachable or erroring: nothing was acknowledged; the client retries.
      log.warning("blob store unavailable: \(e)")
      return retryLater("the blob store is unavailable; retry")
    case .io, .catalogTooNew:
      log.error("internal error: \(e)")
      return .error(status: 500, message: "internal error")
    }
  }

  static func upload(_ e: UploadError) -> HTTPResponse {
    let status: Int =
      switch e {
      case .notFound: 404
      case .expired, .dataLost, .assemblyMismatch: 410
      case .locked: 423
      case .offsetMismatch: 409
      case .exceedsLength: 413
      case .invalidLength, .invalidConcatenation: 400
      case .finalNotAppendable: 403
      case .checksumMismatch: 460  // tus's status for a chunk whose checksum does not match
      }
    return .error(status: status, message: e.description)
  }

  static func image(_ e: ImageError) -> HTTPResponse {
    switch e {
    case .invalidParameter, .disabled: return .error(status: 400, message: e.description)
    case .notAnImage: return .error(status: 415, message: e.description)
    case .sourceTooLarge(let size, let limit):
      return .error(status: 413, message: e.description, extra: ["size": size, "limit": limit])
    case .tooManyPixels, .decodeFailed: return .error(status: 422, message: e.description)
    case .busy: return retryLater(e.description)
    case .clientBusy:
      var r = HTTPResponse.error(status: 429, message: e.description)
      r.headers.add("Retry-After", "1")
      return r
    }
  }

  static func retryLater(_ message: String) -> HTTPResponse {
    var r = HTTPResponse.error(status: 503, message: message)
    r.headers.add("Retry-After", "1")
    return r
  }
}
