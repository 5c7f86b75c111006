import Foundation
import LarderCrypto

/// Streams bytes into an exclusive temporary file while hashing (SHA-256 and CRC32C, and MD5 only
/// to check a client's or when asked) and counting them.
///
/// ```swift
/// let writer = try store.makeWriter(options: .init(sizeLimit: 5 << 20))
/// try writer.write(chunk)            // as many times as needed
/// let staged = try writer.finish()   // verified, fsync'ed, read-only; not yet visible
/// ```
/// The temporary file is `flock`ed for the writer's whole life, so recovery in another process
/// never removes a temp file that is still being written. A writer that is released without
/// ``finish()`` removes its file.
public final class BlobWriter {
  public struct Options: Sendable {
    /// Refuse content larger than this many bytes.
    public var sizeLimit: Int64?
    /// Refuse content whose digest differs (raw bytes), checked in ``finish()``.
    public var expectedSHA256: [UInt8]?
    /// Also the only case MD5 is computed while writing: without it, MD5 is computed after the
    /// commit (``MD5Backfill``), or at once for small content (``FileStore/inlineMD5Limit``).
    public var expectedMD5: [UInt8]?
    /// Also hash MD5 while writing, without one to check: for a write whose answer reports it
    /// (GCS's `md5Hash`), so that no answer reads the content back for it.
    public var computeMD5: Bool

    public init(
      sizeLimit: Int64? = nil, expectedSHA256: [UInt8]? = nil, expectedMD5: [UInt8]? = nil, computeMD5: Bool = false
    ) {
      self.sizeLimit = sizeLimit
      self.expectedSHA256 = expectedSHA256
      self.expectedMD5 = expectedMD5
      self.computeMD5 = computeMD5
    }
  }

  public let options: Options
  public private(set) var byteCount: Int64 = 0
  let path: String
  private var fd: Int32
  private let sha256 = Digest(.sha256)
  /// Only when the client gave an MD5 to verify, or ``Options/computeMD5``.
  private let md5: Digest?
  /// Always: GCS's checksum, known at commit for every size.
  private let crc32c = RunningCRC32C()
  private var head: [UInt8] = []
  private var done = false
  /// Buffers to blocks, writes them and hashes them on another core (see ``BlockSink``).
  private let sink: BlockSink

  /// Refused with ``LarderError/diskFull`` before any file is made while `reserve` is spent
  /// and the disk has no room to spare (see ``SpaceReserve``).
  init(directory: String, options: Options, reserve: SpaceReserve? = nil) throws {
    self.options = options
    md5 = options.expectedMD5 == nil && !options.computeMD5 ? nil : Digest(.md5)
    try reserve?.admitContent()
    while true {
      let candidate = "\(directory)/\(SecureRandom.hexIdentifier()).part"
      let fd: Int32
      do {
        fd = try POSIX.open(
          candidate, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode: 0o600, operation: "create")
      } catch LarderError.io(_, _, EEXIST) {
        continue
      }
      // Take the lock, then make sure recovery did not remove the name between open and flock.
      POSIX.lock(fd)
      if let st = try? POSIX.fstat(fd, path: candidate), st.st_nlink > 0 {
        self.fd = fd
        self.path = candidate
        sink = BlockSink(fd: fd, path: candidate, sha256: sha256, md5: md5, crc32c: crc32c, reserve: reserve)
        break
      }
      POSIX.close(fd)
    }
  }

  deinit {
    if !done { abandon() }
  }

  /// Appends bytes.
  /// - Throws: ``LarderError/sizeLimitExceeded(limit:)`` (the writer is then cancelled),
  ///   ``LarderError/diskFull`` or another I/O error.
  public func write(_ bytes: UnsafeRawBufferPointer) throws {
    precondition(!done, "write after finish or cancel")
    if let limit = options.sizeLimit, byteCount + Int64(bytes.count) > limit {
      cancel()
      throw LarderError.sizeLimitExceeded(limit: limit)
    }
    do {
      try sink.write(bytes)
    } catch {
      cancel()
      throw error
    }
    if head.count < ContentSniffer.headLength {
      head.append(contentsOf: bytes.prefix(ContentSniffer.headLength - head.count))
    }
    byteCount += Int64(bytes.count)
  }

  public func write(_ data: Data) throws {
    try data.withUnsafeBytes { try write($0) }
  }

  public func write(_ bytes: [UInt8]) throws {
    try bytes.withUnsafeBytes { try write($0) }
  }

  /// Verifies the digests, makes the bytes durable and read-only, and sniffs the type.
  /// - Throws: ``LarderError/checksumMismatch(algorithm:expected:actual:)`` or an I/O error;
  ///   the temp file is removed on any failure.
  public func finish() throws -> StagedBlob {
    precondition(!done, "finish called twice")
    let sha: [UInt8]
    let md: [UInt8]?
    do {
      try sink.flush()
      sha = sha256.finalize()
      md = md5?.finalize()
      if let expected = options.expectedSHA256, expected != sha {
        throw LarderError.checksumMismatch(
          algorithm: "sha256", expected: Hex.encode(expected), actual: Hex.encode(sha))
      }
      if let expected = options.expectedMD5, let md, expected != md {
        throw LarderError.checksumMismatch(algorithm: "md5", expected: Hex.encode(expected), actual: Hex.encode(md))
      }
      try POSIX.fsync(fd, path: path)
      try POSIX.fchmod(fd, 0o444, path: path)
    } catch {
      cancel()
      throw error
    }
    done = true
    let staged = StagedBlob(
      path: path, descriptor: OwnedDescriptor(fd), sha256: sha, md5: md, size: byteCount,
      contentType: ContentSniffer.shared.mimeType(of: head), removeOnDiscard: true, crc32c: crc32c.value)
    fd = -1
    return staged
  }

  /// Stops the write and removes the temp file.
  public func cancel() {
    guard !done else { return }
    done = true
    abandon()
  }

  private func abandon() {
    if fd >= 0 {
      POSIX.unlink(path)
      POSIX.close(fd)
      fd = -1
    }
  }
}

@available(*, unavailable)
extension BlobWriter: Sendable {}
