import Foundation

/// An open blob, read by position; closes its descriptor when released.
///
/// The HTTP layer takes the descriptor (``takeDescriptor()``) to send it with `sendfile`. The
/// descriptor is owned by one ``OwnedDescriptor``: a read racing a take or a release never uses
/// or closes a descriptor twice.
public final class BlobReader: Sendable {
  public let path: String
  public let size: Int64
  private let descriptor: OwnedDescriptor

  init(path: String) throws {
    self.path = path
    let fd = try POSIX.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    // Owned at once: if the size cannot be read, releasing `owned` closes the descriptor.
    let owned = OwnedDescriptor(fd)
    size = try owned.use(path: path) { try POSIX.fileSize($0, path: path) }
    descriptor = owned
  }

  /// Hands the descriptor to a new owner, who must close it; the reader is unusable afterwards
  /// (reads throw `EBADF`). A second call returns -1: there is nothing left to hand over.
  public func takeDescriptor() -> Int32 { descriptor.take() ?? -1 }

  /// Reads `range` (clamped to the file).
  public func read(_ range: Range<Int64>) throws -> Data {
    let lower = max(0, min(range.lowerBound, size))
    let upper = max(lower, min(range.upperBound, size))
    return try descriptor.use(path: path) { fd in
      var data = Data(count: Int(upper - lower))
      let n = try data.withUnsafeMutableBytes { try POSIX.readFully(fd, into: $0, at: lower, path: path) }
      data.count = n
      return data
    }
  }

  /// Calls `body` with consecutive chunks of `range`, reading `chunkSize` at a time (flat memory).
  public func forEachChunk(
    in range: Range<Int64>? = nil, chunkSize: Int = 1 << 20, _ body: (UnsafeRawBufferPointer) throws -> Void
  ) throws {
    let range = range ?? 0..<size
    guard !range.isEmpty else { return }
    // Sized to the range and left uninitialized: a zeroed 1 MiB buffer for a 4 KiB blob (the MD5
    // of a small upload at commit) cost a tenth of the upload's CPU in memset and page faults.
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: Int(min(Int64(chunkSize), range.upperBound - range.lowerBound)), alignment: 64)
    defer { buffer.deallocate() }
    var position = range.lowerBound
    while position < range.upperBound {
      let want = Int(min(Int64(buffer.count), range.upperBound - position))
      // The lock is held for one read, not across `body`: a take may come between chunks.
      let n = try descriptor.use(path: path) { fd in
        try POSIX.readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: position, path: path)
      }
      if n == 0 { break }
      try body(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
      position += Int64(n)
    }
  }
}
