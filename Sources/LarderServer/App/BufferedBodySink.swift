import Foundation
import LarderHTTP

/// Collects a small body (JSON) in memory, up to a limit, then hands it to a closure.
final class BufferedBodySink: HTTPBodySink {
  private var buffer: [UInt8] = []
  private let limit: Int
  private let complete: ([UInt8]) throws -> HTTPResponse

  init(limit: Int = 64 * 1024, complete: @escaping ([UInt8]) throws -> HTTPResponse) {
    self.limit = limit
    self.complete = complete
  }

  func receive(_ chunk: UnsafeRawBufferPointer) throws {
    guard buffer.count + chunk.count <= limit else {
      throw HTTPRequestError.bodyTooLarge(limit: Int64(limit))
    }
    buffer.append(contentsOf: chunk)
  }

  func finish() throws -> HTTPResponse {
    try complete(buffer)
  }

  func cancel() { buffer = [] }
}
