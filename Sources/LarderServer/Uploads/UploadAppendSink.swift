import Foundation
import Larder
import LarderHTTP

/// Streams a resumable upload's body (a tus `PATCH` or creation-with-upload `POST`, a Firebase
/// resumable chunk) into an ``UploadAppend``.
///
/// Chunks go straight to `uploads/<id>`: memory stays flat whatever the size. The answer is
/// produced by `complete` only after the bytes are fsync'ed and the offset committed (or the
/// object published). What a broken connection keeps is the protocol's choice: tus clients
/// resume from HEAD's offset (keep what arrived); the Firebase SDK resends a broken chunk whole
/// at the same offset (keep none of it).
final class UploadAppendSink: HTTPBodySink {
  private let keepReceivedOnBreak: Bool
  private let complete: (UploadAppend) throws -> HTTPResponse
  private let decorator: ((inout HTTPResponse) -> Void)?
  private var append: UploadAppend?

  init(
    _ append: UploadAppend, keepReceivedOnBreak: Bool, decorate: ((inout HTTPResponse) -> Void)? = nil,
    complete: @escaping (UploadAppend) throws -> HTTPResponse
  ) {
    self.append = append
    self.keepReceivedOnBreak = keepReceivedOnBreak
    self.decorator = decorate
    self.complete = complete
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
    return try complete(append)
  }

  func cancel() {
    append?.abort(keepReceived: keepReceivedOnBreak)
    append = nil
  }

  func decorate(_ response: inout HTTPResponse) {
    decorator?(&response)
  }
}
