import Foundation

// Free functions, so that types with `stat`/`read` methods of their own can call the POSIX ones.

/// `stat(2)` of `path`; nil with `errno` set.
func fileStatus(_ path: String) -> stat? {
  var st = stat()
  return stat(path, &st) == 0 ? st : nil
}

/// `read(2)` into `buffer`: the count read, 0 at the end, -1 with `errno` set.
func readSome(_ fd: Int32, into buffer: inout [UInt8]) -> Int {
  buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
}

/// The message of the current `errno`.
var errnoText: String { String(cString: strerror(errno)) }
