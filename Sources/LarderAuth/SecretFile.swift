import Foundation

/// The data directory's `secret`: 32 random bytes (stored raw) that keyed HS256 tokens before the
/// key moved to the catalog (`settings.token_secret`, shared by every node). The server reads an
/// existing file once, with ``loadIfPresent(at:)``, to adopt its key into the catalog so tokens
/// issued before the upgrade stay valid.
///
/// ```swift
/// let legacy = try SecretFile.loadIfPresent(at: dataDirectory.appending(path: "secret"))
/// ```
/// The file is refused, with a message saying how to fix it, when group or others can read it,
/// when it is not a regular file (symbolic links are not followed), or when it does not hold
/// exactly 32 bytes. Nothing creates it any more: a new store's key is made in the catalog.
public enum SecretFile {
  public static let byteCount = 32

  /// The secret at `url`, or nil when there is no file (nothing is created).
  /// - Throws: `AuthConfigurationError` for an insecure, malformed or unreadable file.
  public static func loadIfPresent(at url: URL) throws(AuthConfigurationError) -> [UInt8]? {
    try load(url.path)
  }

  /// The secret, or nil when the file does not exist.
  private static func load(_ path: String) throws(AuthConfigurationError) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
    if fd < 0 {
      if errno == ENOENT { return nil }
      throw .io(path: path, operation: "open", errno: errno)
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else { throw .io(path: path, operation: "stat", errno: errno) }
    guard info.st_mode & S_IFMT == S_IFREG else { throw .secretFileNotRegular(path: path) }
    let permissions = UInt16(info.st_mode & 0o7777)
    guard permissions & 0o077 == 0 else { throw .insecureSecretFile(path: path, mode: permissions) }
    // Read one byte more than expected so a longer file is noticed.
    var buffer = [UInt8](repeating: 0, count: byteCount + 1)
    var filled = 0
    while filled < buffer.count {
      let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
      if n < 0 {
        if errno == EINTR { continue }
        throw .io(path: path, operation: "read", errno: errno)
      }
      if n == 0 { break }
      filled += n
    }
    guard filled == byteCount else {
      throw .secretFileWrongLength(
        path: path, length: filled > byteCount ? Int(info.st_size) : filled, expected: byteCount)
    }
    return Array(buffer.prefix(byteCount))
  }
}
