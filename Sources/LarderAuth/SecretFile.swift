import Foundation
import LarderCrypto

/// The data directory's `secret`: 32 random bytes (stored raw) that keyed HS256 tokens before the
/// key moved to the catalog (`settings.token_secret`, shared by every node). The server reads an
/// existing file once, with ``loadIfPresent(at:)``, to adopt its key into the catalog so tokens
/// issued before the upgrade stay valid.
///
/// ```swift
/// let legacy = try SecretFile.loadIfPresent(at: dataDirectory.appending(path: "secret"))
/// ```
/// Creation is atomic and never clobbers: the bytes go to a temporary file made with `O_EXCL` and
/// mode 0600, are `fsync`ed, then `link`ed to the final name (which fails if another process won
/// the race, whose secret is then used), and the directory is `fsync`ed. An existing file is
/// refused, with a message saying how to fix it, when group or others can read it, when it is not a
/// regular file (symbolic links are not followed), or when it does not hold exactly 32 bytes.
public enum SecretFile {
  public static let byteCount = 32

  /// Reads the secret at `url`, creating it first when absent.
  /// - Throws: `AuthConfigurationError` for an insecure, malformed or unreadable file.
  public static func loadOrCreate(at url: URL) throws(AuthConfigurationError) -> [UInt8] {
    let path = url.path
    if let existing = try load(path) { return existing }
    try create(path)
    guard let created = try load(path) else { throw .io(path: path, operation: "open", errno: ENOENT) }
    return created
  }

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

  private static func create(_ path: String) throws(AuthConfigurationError) {
    let directory = (path as NSString).deletingLastPathComponent
    let temporary = path + ".tmp-" + SecureRandom.hexIdentifier(byteCount: 8)
    let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw .io(path: temporary, operation: "create", errno: errno) }
    defer { unlink(temporary) }
    do {
      defer { close(fd) }
      // The umask can only remove bits, but set the mode explicitly in case it removed the owner's.
      guard fchmod(fd, 0o600) == 0 else { throw .io(path: temporary, operation: "chmod", errno: errno) }
      let secret = SecureRandom.bytes(byteCount)
      var written = 0
      while written < secret.count {
        let n = secret.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
        if n < 0 {
          if errno == EINTR { continue }
          throw .io(path: temporary, operation: "write", errno: errno)
        }
        written += n
      }
      guard fsync(fd) == 0 else { throw .io(path: temporary, operation: "fsync", errno: errno) }
    }
    if link(temporary, path) != 0 {
      let error = errno
      switch error {
      case EEXIST:
        return  // another process created it first: use theirs
      case EPERM, EOPNOTSUPP, ENOSYS:
        // Filesystems without hard links: rename, after checking again that no secret appeared.
        if access(path, F_OK) == 0 { return }
        guard rename(temporary, path) == 0 else { throw .io(path: path, operation: "rename", errno: errno) }
      default:
        throw .io(path: path, operation: "link", errno: error)
      }
    }
    let dirFD = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if dirFD >= 0 {
      _ = fsync(dirFD)
      close(dirFD)
    }
  }
}
