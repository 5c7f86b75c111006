import Foundation
import Larder
import LarderHTTP

/// Streams a `PATCH` (or a creation-with-upload `POST`) body into an ``UploadAppend``.
///
/// Chunks go straight to `uploads/<id>`: memory stays flat whatever the size. The answer is
/// produced only after the bytes are fsync'ed and the offset committed (or the object published).
final class TusAppendSink: HTTPBodySink {
  private let endpoint: TusEndpoint
  private let request: HTTPRequest
  private let identity: Identity?
  /// The upload this `POST` created; nil for a `PATCH`.
  private let created: Upload?
  private var append: UploadAppend?

  init(
    endpoint: TusEndpoint, request: HTTPRequest, append: UploadAppend, identity: Identity?, created: Upload?
  ) {
    self.endpoint = endpoint
    self.request = request
    self.append = append
    self.identity = identity
    self.created = created
  }

  func receive(_ chunk: UnsafeRawBufferPointer) throws {
    guard let append else { throw LarderError.cancelled }
    do {
      try append.write(chunk)
    } catch {
      self.append = nil
      throw HTTPResponseError(answer(APIError.response(for: error)))
    }
  }

  func finish() throws -> HTTPResponse {
    guard let append else { throw LarderError.cancelled }
    self.append = nil
    do {
      return answer(try endpoint.complete(append, identity: identity))
    } catch {
      return answer(APIError.response(for: error))
    }
  }

  func cancel() {
    // The connection broke: keep what arrived (tus clients resume from HEAD's offset).
    append?.abort(keepReceived: true)
    append = nil
  }

  private func answer(_ response: HTTPResponse) -> HTTPResponse {
    var r = response
    if let created {
      if r.status == 204 { r.status = 201 }
      r.headers.set("Location", endpoint.location(of: created))
      if !r.headers.contains("Upload-Expires") {
        r.headers.set("Upload-Expires", HTTPDate.format(created.expiresAt))
      }
    }
    return endpoint.finish(r, request: request)
  }
}
