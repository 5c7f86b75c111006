import Foundation

// Free functions, so that types with `stat`/`read` methods of their own can call the POSIX ones.

/// `stat(2)` of `path`; nil with `errno` set.
func fileStatus(_ path: String) -> stat? {
  var st = stat()
  return stat(path, &st) == 0 ? st : nil
}

/// Reads `fd` to its end a megabyte at a time, handing each piece to `body` (an interrupted
/// read is retried).
/// - Throws: ``CommandFailure`` naming `path` when a read fails, or what `body` threw.
func forEachPiece(of fd: Int32, path: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
  var buffer = [UInt8](repeating: 0, count: 1 << 20)
  while true {
    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    if n < 0 {
      if errno == EINTR { continue }
      throw CommandFailure("cannot read \(path): \(errnoText)")
    }
    if n == 0 { return }
    try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
  }
}

/// The message of the current `errno`.
var errnoText: String { String(cString: strerror(errno)) }
