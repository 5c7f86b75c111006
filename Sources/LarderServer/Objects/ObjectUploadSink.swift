import Foundation
import Larder
import LarderHTTP

/// Streams a simple upload's body into the blob write path, then publishes the object.
///
/// Memory stays flat: each chunk is written to the temp file and hashed, never kept. The
/// policy runs again on the real size and sniffed type before anything becomes visible.
final class ObjectUploadSink: HTTPBodySink {
  private let context: ServiceContext
  private let path: ObjectPath
  private let identity: Identity?
  private let options: ObjectWriteOptions
  private var writer: BlobWriter?

  init(
    context: ServiceContext, path: ObjectPath, identity: Identity?, options: ObjectWriteOptions, expectedMD5: [UInt8]?
  ) throws {
    self.context = context
    self.path = path
    self.identity = identity
    self.options = options
    writer = try context.larder.files.makeWriter(
      options: .init(sizeLimit: context.maxUploadSize, expectedMD5: expectedMD5))
  }

  func receive(_ chunk: UnsafeRawBufferPointer) throws {
    guard let writer else { throw LarderError.cancelled }
    try writer.write(chunk)
  }

  func finish() throws -> HTTPResponse {
    guard let writer else { throw LarderError.cancelled }
    self.writer = nil
    let staged = try writer.finish()
    // The policy is asked again on the real size and sniffed type, inside the write, about the
    // row it replaces.
    let object = try context.larder.objects.put(
      path, staged: staged, options: options, admission: context.admission(for: identity))
    return ObjectsEndpoint.writeResponse(object, identity: identity, context: context)
  }

  func cancel() {
    writer?.cancel()
    writer = nil
  }
}
