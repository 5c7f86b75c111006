import Foundation
import LarderCrypto

/// Buffers streamed bytes into 1 MiB blocks, hashes each block and writes it to a file.
///
/// HTTP bodies arrive in chunks of a few KiB: writing and hashing each at once cost a fifth of
/// an upload's CPU in system calls (measured), 1 MiB blocks do not. When MD5 is kept (only to
/// check a client's MD5), for large blocks it (the slower digest here) runs on another core while this thread computes SHA-256 (and any extra
/// digest) and writes, so one upload is bounded by the slower of the two paths rather than by
/// the sum of all of them. Shared by ``BlobWriter`` and resumable-upload appends.
///
/// Nothing is durable, and the digests do not cover buffered bytes, until ``flush()``.
/// Each block is first admitted by the store's ``SpaceReserve``: while a full disk has spent it,
/// content may not take the space left for deletes.
final class BlockSink {
  let fd: Int32
  let path: String
  /// The running digests (nil = not kept); they cover every flushed byte.
  let sha256: Digest?
  let md5: Digest?
  /// Another digest over the same bytes (a client's per-chunk checksum).
  let extra: Digest?
  /// Asked before each block is written (nil: no reserve to keep).
  let reserve: SpaceReserve?
  /// Where the next block goes (`pwrite`); nil writes at the descriptor's position.
  private(set) var position: Int64?
  private var pending: [UInt8] = []

  static let blockSize = 1 << 20
  static let parallelHashSize = 256 * 1024

  init(
    fd: Int32, path: String, sha256: Digest?, md5: Digest?, extra: Digest? = nil, at position: Int64? = nil,
    reserve: SpaceReserve?
  ) {
    self.fd = fd
    self.path = path
    self.sha256 = sha256
    self.md5 = md5
    self.extra = extra
    self.position = position
    self.reserve = reserve
  }

  /// Takes bytes; a full block is hashed and written before returning.
  func write(_ bytes: UnsafeRawBufferPointer) throws {
    if pending.isEmpty && bytes.count >= Self.blockSize {
      try consume(bytes)
    } else {
      if pending.capacity < Self.blockSize { pending.reserveCapacity(Self.blockSize) }
      pending.append(contentsOf: bytes)
      if pending.count >= Self.blockSize { try flush() }
    }
  }

  /// Hashes and writes what is buffered (not fsync'ed).
  func flush() throws {
    guard !pending.isEmpty else { return }
    try pending.withUnsafeBytes { try consume($0) }
    pending.removeAll(keepingCapacity: true)
  }

  /// Hashes and writes one block, in order.
  private func consume(_ block: UnsafeRawBufferPointer) throws {
    try reserve?.admitContent(adding: block.count)
    guard block.count >= Self.parallelHashSize, let md5 else {
      sha256?.update(block)
      md5?.update(block)
      extra?.update(block)
      try put(block)
      return
    }
    let work = ParallelDigest(digest: md5, block: block)
    let group = DispatchGroup()
    DispatchQueue.global(qos: .userInitiated).async(group: group) { work.run() }
    // The block must stay valid until the other thread is done with it.
    defer { group.wait() }
    sha256?.update(block)
    extra?.update(block)
    try put(block)
  }

  private func put(_ block: UnsafeRawBufferPointer) throws {
    if let position {
      try POSIX.writeAll(fd, block, at: position, path: path)
      self.position = position + Int64(block.count)
    } else {
      try POSIX.writeAll(fd, block, path: path)
    }
  }
}

@available(*, unavailable)
extension BlockSink: Sendable {}

/// One digest update handed to another thread; the caller waits for it before touching the
/// digest or the block again, which is what makes the unchecked sendability sound.
private final class ParallelDigest: @unchecked Sendable {
  let digest: Digest
  let block: UnsafeRawBufferPointer
  init(digest: Digest, block: UnsafeRawBufferPointer) {
    self.digest = digest
    self.block = block
  }
  func run() { digest.update(block) }
}
