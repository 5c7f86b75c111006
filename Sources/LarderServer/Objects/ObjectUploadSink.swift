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
  private let completion: WriteCompletion?
  /// The row the request judged before its body (``ObjectService/judgeWrite(_:at:identity:check:)``).
  private let judged: JudgedObject
  /// The size the early question was asked about (the request's `Content-Length`).
  private let declaredSize: Int64?
  private var writer: BlobWriter?

  init(
    context: ServiceContext, path: ObjectPath, identity: Identity?, options: ObjectWriteOptions, expectedMD5: [UInt8]?,
    judged: JudgedObject, declaredSize: Int64?, completion: WriteCompletion? = nil
  ) throws {
    self.declaredSize = declaredSize
    self.context = context
    self.path = path
    self.identity = identity
    self.options = options
    self.judged = judged
    self.completion = completion
    // GCS answers report `md5Hash` (and small content has it known at commit anyway): hashed
    // as the bytes arrive rather than read back.
    let reportsMD5 = completion != nil || (declaredSize ?? .max) <= FileStore.inlineMD5Limit
    writer = try context.larder.files.makeWriter(
      options: .init(sizeLimit: context.maxUploadSize, expectedMD5: expectedMD5, computeMD5: reportsMD5))
  }

  func receive(_ chunk: UnsafeRawBufferPointer) throws {
    guard let writer else { throw LarderError.cancelled }
    try writer.write(chunk)
  }

  func finish() throws -> HTTPResponse {
    guard let writer else { throw LarderError.cancelled }
    self.writer = nil
    return try context.publish(
      writer, at: path, options: options, identity: identity, judged: judged, declaredSize: declaredSize,
      completion: completion)
  }

  func cancel() {
    writer?.cancel()
    writer = nil
  }
}

/// How a write is judged and answered when not as the Firebase API does: the GCS JSON API adds
/// its preconditions to the admission step and answers with its own object resource.
struct WriteCompletion {
  var admission: any ObjectAdmission
  var answer: (StoredObject) throws -> HTTPResponse
  /// The protocol's preconditions on the row the write replaces, checked on the row the early
  /// question judges (they are checked again by `admission` if the row changes).
  var check: (StoredObject?) throws -> Void = { _ in }
}

extension ServiceContext {
  /// Finishes a single-request upload's writer and publishes it at `path`: the policy is asked
  /// again on the real size and detected type, inside the write, about the row it replaces (the
  /// admission step) where the early question (`judged`) left it open or the row changed. Answers the object's metadata (with `md5Hash` even when it is not yet
  /// known for large content, if `withMD5`).
  func publish(
    _ writer: BlobWriter, at path: ObjectPath, options: ObjectWriteOptions, identity: Identity?, withMD5: Bool = false,
    judged: JudgedObject? = nil, declaredSize: Int64? = nil, completion: WriteCompletion? = nil,
    check: ((StagedBlob) throws -> Void)? = nil
  ) throws -> HTTPResponse {
    let staged = try writer.finish()
    try check?(staged)
    let object = try ObjectService(context: self).publish(
      staged, at: path, options: options, judged: judged, declaredSize: declaredSize, identity: identity,
      admission: completion?.admission)
    if let completion { return try completion.answer(object) }
    return ObjectsEndpoint(context: self).writeResponse(object, identity: identity, withMD5: withMD5)
  }
}
