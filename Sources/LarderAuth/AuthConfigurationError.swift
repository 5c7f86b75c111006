import Foundation

/// Why the server's authentication could not be set up (secret file, key files). These are
/// start-up errors for the operator, unlike `AuthError`, which answers a request.
public enum AuthConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
  /// A system call on `path` failed with `errno`.
  case io(path: String, operation: String, errno: Int32)
  /// The secret file can be read by group or others; `mode` is its permission bits.
  case insecureSecretFile(path: String, mode: UInt16)
  /// The secret file does not hold exactly `expected` bytes.
  case secretFileWrongLength(path: String, length: Int, expected: Int)
  /// The secret file is not a regular file (a directory, a FIFO, a device).
  case secretFileNotRegular(path: String)
  /// A PEM or JWKS file holds no usable key, or a key OpenSSL refuses.
  case invalidKeyFile(path: String, reason: String)

  /// A stable machine-readable code.
  public var code: String {
    switch self {
    case .io: "io_error"
    case .insecureSecretFile: "insecure_secret_file"
    case .secretFileWrongLength: "secret_file_wrong_length"
    case .secretFileNotRegular: "secret_file_not_regular"
    case .invalidKeyFile: "invalid_key_file"
    }
  }

  /// The message, so `larder serve` prints it rather than the case's structure.
  public var description: String { message }

  /// A message that tells the operator what to do.
  public var message: String {
    switch self {
    case .io(let path, let op, let err):
      "\(op) \(path): \(String(cString: strerror(err)))"
    case .insecureSecretFile(let path, let mode):
      "secret file \(path) has mode \(String(mode, radix: 8)); it must not be readable by group or others (chmod 600 \(path))"
    case .secretFileWrongLength(let path, let length, let expected):
      "secret file \(path) holds \(length) bytes, expected \(expected); delete it to create a new one (this invalidates issued tokens)"
    case .secretFileNotRegular(let path):
      "secret file \(path) is not a regular file"
    case .invalidKeyFile(let path, let reason):
      "key file \(path): \(reason)"
    }
  }
}
