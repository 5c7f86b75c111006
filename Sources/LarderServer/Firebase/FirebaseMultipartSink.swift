import Foundation
import Larder
import LarderHTTP

/// Streams a Firebase multipart upload (`X-Goog-Upload-Protocol: multipart`) into the blob
/// write path: the JSON part is parsed and checked (name, rules on the declared size and type)
/// before the first content byte is written; content bytes go straight to the writer, so memory
/// stays flat. Nothing becomes visible unless the whole wrapper parsed and the rules allow the
/// real content.
final class FirebaseMultipartSink: HTTPBodySink {
  private let context: ServiceContext
  private let bucket: String
  private let queryName: String?
  private let identity: Identity?
  private let ifGenerationMatch: Int64?
  /// The request's Content-Length: less the wrapper, the content's size for the rules' first look.
  private let declaredLength: Int64?
  private var parser: MultipartRelatedParser
  private var writer: BlobWriter?
  private var path: ObjectPath?
  private var options = ObjectWriteOptions()
  private var resource = FirebaseUploadMetadata()
  private let completion: WriteCompletion?
  /// The row the JSON part's question judged, and the content size it was asked about.
  private var judged: JudgedObject?
  private var declaredSize: Int64?

  init(
    context: ServiceContext, bucket: String, name: String?, identity: Identity?, ifGenerationMatch: Int64?,
    boundary: String, requestLength: Int64?, completion: WriteCompletion? = nil
  ) throws {
    self.context = context
    self.completion = completion
    self.bucket = bucket
    queryName = name
    self.identity = identity
    self.ifGenerationMatch = ifGenerationMatch
    declaredLength = requestLength
    do {
      parser = try MultipartRelatedParser(boundary: boundary, metadataLimit: 64 * 1024)
    } catch let error as MultipartError {
      throw LarderError.invalidArgument(error.message)
    }
  }

  func receive(_ chunk: UnsafeRawBufferPointer) throws {
    do {
      try parser.feed(chunk, metadataReady: { try self.begin($0) }) { bytes in
        guard let writer = self.writer else { throw LarderError.cancelled }
        try writer.write(bytes)
      }
    } catch {
      // The temp file goes before the refusal is answered (`cancel()` only comes after it), so a
      // client that reads the 400 finds nothing of its body left on disk.
      cancel()
      if let error = error as? MultipartError {
        throw LarderError.invalidArgument("multipart upload: \(error.message)")
      }
      throw error
    }
  }

  /// The JSON part is complete: decide on it, then open the writer for the content.
  private func begin(_ part: MultipartMetadataPart) throws {
    resource = try FirebaseUploadMetadata.parse(part.json)
    _ = try resource.expectedCRC32C()
    path = try ObjectPath(bucket: bucket, name: try resource.objectName(query: queryName, bucket: bucket))
    options = resource.writeOptions(declaredFallback: part.contentPartType, ifGenerationMatch: ifGenerationMatch)
    try options.validate()
    declaredSize = declaredLength.map { max(0, $0 - part.contentOffset - part.closingLength) }
    judged = try ObjectService(context: context).judgeWrite(
      .declared(bucket: bucket, name: path!.name, size: declaredSize, options: options),
      at: path!, identity: identity, check: completion?.check ?? { _ in })
    // Its answer reports `md5Hash`: hashed as the bytes arrive rather than read back.
    writer = try context.larder.files.makeWriter(
      options: .init(sizeLimit: context.maxUploadSize, expectedMD5: try resource.expectedMD5(), computeMD5: true))
  }

  func finish() throws -> HTTPResponse {
    do {
      try parser.finish()
    } catch let error as MultipartError {
      cancel()
      throw LarderError.invalidArgument("multipart upload: \(error.message)")
    }
    guard let writer, let path else { throw LarderError.cancelled }
    self.writer = nil
    // Firebase's answers always carry md5Hash (the SDK reads it), computed after the commit if need be.
    return try context.publish(
      writer, at: path, options: options, identity: identity, withMD5: true, judged: judged, declaredSize: declaredSize,
      completion: completion,
      check: resource.checkCRC32C)
  }

  func cancel() {
    writer?.cancel()
    writer = nil
  }
}
