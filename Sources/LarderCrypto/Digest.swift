internal import CCrypto

/// A hash algorithm that OpenSSL computes for Larder.
public enum DigestAlgorithm: String, Sendable, CaseIterable {
  case sha256
  case sha1
  case md5

  /// The digest's length in bytes.
  public var byteCount: Int {
    switch self {
    case .sha256: 32
    case .sha1: 20
    case .md5: 16
    }
  }

  fileprivate var evp: OpaquePointer? {
    switch self {
    case .sha256: EVP_sha256()
    case .sha1: EVP_sha1()
    case .md5: EVP_md5()
    }
  }
}

/// An incremental message digest over OpenSSL.
///
/// ```swift
/// var d = Digest(.sha256)
/// d.update(chunk)
/// let hash = d.finalize()   // 32 bytes
/// ```
/// SHA-256 runs on OpenSSL's low-level `SHA256_CTX`, whose fields can be saved and restored
/// (`savedState()`, `init(restoringSHA256:)`) so an upload continued on another node resumes its
/// hash without re-reading the bytes; an EVP context cannot be exported. The other algorithms use
/// EVP. Both reach the same assembly block function, so throughput is the same.
/// A `Digest` owns its context and is not shared between threads.
public final class Digest {
  public let algorithm: DigestAlgorithm
  /// Internal for `Digest+SavedState.swift`, which reads and writes the SHA-256 fields.
  let context: Context

  enum Context {
    case evp(OpaquePointer)
    case sha256(UnsafeMutablePointer<SHA256_CTX>)
  }

  public init(_ algorithm: DigestAlgorithm) {
    self.algorithm = algorithm
    switch algorithm {
    case .sha256:
      let ctx = UnsafeMutablePointer<SHA256_CTX>.allocate(capacity: 1)
      precondition(larder_sha256_init(ctx) == 1, "SHA256_Init failed")
      context = .sha256(ctx)
    case .sha1, .md5:
      guard let ctx = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
      precondition(EVP_DigestInit_ex(ctx, algorithm.evp, nil) == 1, "EVP_DigestInit_ex failed")
      context = .evp(ctx)
    }
  }

  deinit {
    switch context {
    case .evp(let ctx): EVP_MD_CTX_free(ctx)
    case .sha256(let ctx): ctx.deallocate()
    }
  }

  /// Feeds bytes into the digest.
  public func update(_ bytes: UnsafeRawBufferPointer) {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return }
    switch context {
    case .sha256(let ctx):
      precondition(larder_sha256_update(ctx, base, bytes.count) == 1, "SHA256_Update failed")
    case .evp(let ctx):
      precondition(EVP_DigestUpdate(ctx, base, bytes.count) == 1, "EVP_DigestUpdate failed")
    }
  }

  public func update<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
    let handled: Void? = bytes.withContiguousStorageIfAvailable { update(UnsafeRawBufferPointer($0)) }
    if handled == nil { Array(bytes).withUnsafeBytes { update($0) } }
  }

  /// A copy of the running state, so a prefix digest can be kept while more bytes arrive.
  public func copy() -> Digest {
    let other = Digest(algorithm)
    switch (context, other.context) {
    case (.sha256(let from), .sha256(let to)):
      to.pointee = from.pointee
    case (.evp(let from), .evp(let to)):
      precondition(EVP_MD_CTX_copy_ex(to, from) == 1, "EVP_MD_CTX_copy_ex failed")
    default:
      preconditionFailure("Digest.copy: contexts of one algorithm differ in kind")
    }
    return other
  }

  /// Finishes the digest and returns it; the object must not be updated afterwards.
  public func finalize() -> [UInt8] {
    switch context {
    case .sha256(let ctx):
      var out = [UInt8](repeating: 0, count: DigestAlgorithm.sha256.byteCount)
      precondition(larder_sha256_final(&out, ctx) == 1, "SHA256_Final failed")
      return out
    case .evp(let ctx):
      var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
      var length: UInt32 = 0
      precondition(EVP_DigestFinal_ex(ctx, &out, &length) == 1, "EVP_DigestFinal_ex failed")
      return Array(out.prefix(Int(length)))
    }
  }

  /// One-shot digest of a buffer.
  public static func hash<Bytes: Sequence>(_ algorithm: DigestAlgorithm, _ bytes: Bytes) -> [UInt8]
  where Bytes.Element == UInt8 {
    let d = Digest(algorithm)
    d.update(bytes)
    return d.finalize()
  }
}

@available(*, unavailable)
extension Digest: Sendable {}

/// HMAC (RFC 2104) over OpenSSL's SHA-256.
public enum HMAC {
  /// HMAC-SHA256 of `message` with `key`: SHA-256 of the key's outer pad and the SHA-256 of its
  /// inner pad and the message. Built on ``Digest`` rather than OpenSSL 3's `HMAC()`, which
  /// looks its algorithm up in the provider tables on every call (8 % of a webhook delivery's
  /// CPU, each delivery signed once).
  public static func sha256(key: [UInt8], message: [UInt8]) -> [UInt8] {
    let blockSize = 64
    var block = key.count > blockSize ? Digest.hash(.sha256, key) : key
    block.append(contentsOf: repeatElement(0, count: blockSize - block.count))
    let inner = Digest(.sha256)
    inner.update(block.map { $0 ^ 0x36 })
    inner.update(message)
    let outer = Digest(.sha256)
    outer.update(block.map { $0 ^ 0x5c })
    outer.update(inner.finalize())
    return outer.finalize()
  }
}

/// Cryptographically secure random bytes from OpenSSL's DRBG.
public enum SecureRandom {
  public static func bytes(_ count: Int) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: count)
    precondition(RAND_bytes(&out, Int32(count)) == 1, "RAND_bytes failed")
    return out
  }

  /// A random identifier of `byteCount` bytes as lower-case hex.
  public static func hexIdentifier(byteCount: Int = 16) -> String {
    Hex.encode(bytes(byteCount))
  }
}

/// Lower-case hexadecimal and constant-time comparison.
public enum Hex {
  private static let digits = Array("0123456789abcdef".utf8)

  public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
    var out = [UInt8]()
    out.reserveCapacity(bytes.underestimatedCount * 2)
    for b in bytes {
      out.append(digits[Int(b >> 4)])
      out.append(digits[Int(b & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// Decodes hex (either case); nil for odd length or a non-hex character.
  public static func decode(_ string: String) -> [UInt8]? {
    let chars = Array(string.utf8)
    guard chars.count % 2 == 0 else { return nil }
    func value(_ c: UInt8) -> UInt8? {
      switch c {
      case 0x30...0x39: c - 0x30
      case 0x61...0x66: c - 0x61 + 10
      case 0x41...0x46: c - 0x41 + 10
      default: nil
      }
    }
    var out = [UInt8]()
    out.reserveCapacity(chars.count / 2)
    var i = 0
    while i < chars.count {
      guard let hi = value(chars[i]), let lo = value(chars[i + 1]) else { return nil }
      out.append(hi << 4 | lo)
      i += 2
    }
    return out
  }
}

/// Compares two byte strings in time that depends only on their lengths.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
  guard a.count == b.count else { return false }
  var diff: UInt8 = 0
  for i in 0..<a.count { diff |= a[i] ^ b[i] }
  return diff == 0
}
