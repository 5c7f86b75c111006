import Foundation
import Larder
import LarderHTTP

/// Streams a `PATCH` (or a creation-with-upload `POST`) body into an ``UploadAppend``.
///
/// Chunks go straight to `uploads/<id>`: memory stays flat whatever the size. The answer is
/// produced only after the bytes are fsync'ed and the offset committed (or the object published).
final class TusAppendSink: HTTPBodySink {
  private let endpoint: TusEndpoint
  private let identity: Identity?
  /// The upload this `POST` created; nil for a `PATCH`.
  private let created: Upload?
  private var append: UploadAppend?

  init(
    endpoint: TusEndpoint, request: HTTPRequest, append: UploadAppend, identity: Identity?, created: Upload?
  ) {
    self.endpoint = endpoint
    self.append = append
    self.identity = identity
    self.created = created
  }

  func receive(_ chunk: UnsafeRawBufferPointer) throws {
    guard let append else { throw LarderError.cancelled }
    do {
      try append.write(chunk)
    } catch {
      // The append settled itself (kept or dropped its bytes); `cancel` must not touch it.
      self.append = nil
      throw error
    }
  }

  func finish() throws -> HTTPResponse {
    guard let append else { throw LarderError.cancelled }
    self.append = nil
    return try endpoint.complete(append, identity: identity)
  }

  func cancel() {
    // The connection broke: keep what arrived (tus clients resume from HEAD's offset).
    append?.abort(keepReceived: true)
    append = nil
  }

  /// A creation-with-upload answer, success or error, names the upload it created, so the
  /// client can resume it.
  func decorate(_ r: inout HTTPResponse) {
    guard let created else { return }
    if r.status == 204 { r.status = 201 }
    r.headers.set("Location", endpoint.location(of: created))
    if !r.headers.contains("Upload-Expires") {
      r.headers.set("Upload-Expires", HTTPDate.format(created.expiresAt))
    }
  }
}
