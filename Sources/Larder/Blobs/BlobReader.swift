import Foundation

/// An open blob, read by position; closes its descriptor when released.
///
/// The HTTP layer takes the descriptor (``takeDescriptor()``) to send it with `sendfile`.
public final class BlobReader: @unchecked Sendable {
  public let path: String
  public let size: Int64
  private var fd: Int32

  init(path: String) throws {
    self.path = path
    let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    guard fd >= 0 else { throw LarderError.posix("open", path) }
    self.fd = fd
    do {
      size = try POSIX.fileSize(fd, path: path)
    } catch {
      close(fd)
      throw error
    }
  }

  deinit { if fd >= 0 { close(fd) } }

  /// Hands the descriptor to a new owner, who must close it; the reader is unusable afterwards.
  public func takeDescriptor() -> Int32 {
    let taken = fd
    fd = -1
    return taken
  }

  /// Reads `range` (clamped to the file).
  public func read(_ range: Range<Int64>) throws -> Data {
    let lower = max(0, min(range.lowerBound, size))
    let upper = max(lower, min(range.upperBound, size))
    var data = Data(count: Int(upper - lower))
    let n = try data.withUnsafeMutableBytes { try POSIX.readFully(fd, into: $0, at: lower, path: path) }
    data.count = n
    return data
  }

  /// Calls `body` with consecutive chunks of `range`, reading `chunkSize` at a time (flat memory).
  public func forEachChunk(
    in range: Range<Int64>? = nil, chunkSize: Int = 1 << 20, _ body: (UnsafeRawBufferPointer) throws -> Void
  ) throws {
    let range = range ?? 0..<size
    var buffer = [UInt8](repeating: 0, count: chunkSize)
    var position = range.lowerBound
    while position < range.upperBound {
      let want = Int(min(Int64(chunkSize), range.upperBound - position))
      let n = try buffer.withUnsafeMutableBytes {
        try POSIX.readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]), at: position, path: path)
      }
      if n == 0 { break }
      try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
      position += Int64(n)
    }
  }
}
