import Foundation
import LarderCrypto

/// Buffers streamed bytes into 256 KiB blocks, writes each block to a file and hashes it on
/// another core while the next block arrives.
///
/// HTTP bodies arrive in chunks of a few KiB: writing and hashing each at once cost a fifth of
/// an upload's CPU in system calls (measured), 256 KiB blocks do not (measured: the same CPU
/// per MiB as 1 MiB blocks). Two buffers per upload in flight, so 256 KiB keeps 200 concurrent
/// uploads at 181 MiB peak RSS where two 1 MiB buffers took 483 MiB. SHA-256 is the largest cost
/// of an upload (about half its CPU, one core hashes ~1.1 GB/s here), so it is pipelined: a full
/// block is handed to a hashing task and this thread writes it and goes back to receiving into
/// the second buffer; the next block waits only for the previous block's hash, never for its own.
/// An upload is then bounded by the slower of hashing and receive+write, not their sum. MD5 (kept
/// only to check a client's or for an answer that reports it) and CRC32C (GCS's) run as tasks of
/// their own beside SHA-256. Digests see the blocks in order.
/// Each written block's writeback is started at once (``POSIX/startWriteback(_:offset:count:)``),
/// so the disk works during the body and the fsync that ends it waits for the tail alone.
/// Shared by ``BlobWriter`` and resumable-upload appends.
///
/// Nothing is durable, and the digests do not cover buffered bytes, until ``flush()``; the
/// digests may be read only after it (it waits for the hashing in flight).
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
  /// The running CRC32C (nil = not kept); it covers every flushed byte, as the digests do.
  let crc32c: RunningCRC32C?
  /// Asked before each block is written (nil: no reserve to keep).
  let reserve: SpaceReserve?
  /// Where the next block goes (`pwrite`); nil writes at the descriptor's position.
  private(set) var position: Int64?
  /// Bytes written at the descriptor's position (when `position` is nil): where the next one starts.
  private var appended: Int64 = 0
  /// Two block buffers: one fills while the other is being hashed. Allocated on first write.
  private var buffers: [UnsafeMutableRawBufferPointer] = []
  private var current = 0
  private var filled = 0
  /// The hashing of the last block handed over, if not yet waited for. It reads the other
  /// buffer, so that buffer is neither refilled nor freed before ``waitForHashing()``.
  private var hashing: DispatchGroup?

  static let blockSize = 256 << 10

  init(
    fd: Int32, path: String, sha256: Digest?, md5: Digest?, extra: Digest? = nil, crc32c: RunningCRC32C? = nil,
    at position: Int64? = nil, reserve: SpaceReserve?
  ) {
    self.crc32c = crc32c
    self.fd = fd
    self.path = path
    self.sha256 = sha256
    self.md5 = md5
    self.extra = extra
    self.position = position
    self.reserve = reserve
  }

  deinit {
    waitForHashing()
    for buffer in buffers { buffer.deallocate() }
  }

  /// Takes bytes; a full block is written (and its hashing started) before returning.
  func write(_ bytes: UnsafeRawBufferPointer) throws {
    if filled == 0 && bytes.count >= Self.blockSize {
      // Large writes from code (not HTTP) skip the copy; the caller's bytes are only valid
      // during this call, so their hashing is waited for here.
      try consume(bytes)
      waitForHashing()
      return
    }
    var rest = bytes
    while !rest.isEmpty {
      if buffers.isEmpty {
        buffers = (0..<2).map { _ in .allocate(byteCount: Self.blockSize, alignment: 64) }
      }
      let n = min(rest.count, Self.blockSize - filled)
      UnsafeMutableRawBufferPointer(rebasing: buffers[current][filled..<filled + n]).copyMemory(
        from: UnsafeRawBufferPointer(rebasing: rest[..<n]))
      filled += n
      rest = UnsafeRawBufferPointer(rebasing: rest[n...])
      if filled == Self.blockSize { try consumeBuffered() }
    }
  }

  /// Writes what is buffered (not fsync'ed) and waits until the digests cover it.
  func flush() throws {
    if filled > 0 {
      if filled <= Self.inlineHashLimit { try consumeInline() } else { try consumeBuffered() }
    }
    waitForHashing()
  }

  /// A last block up to this size is hashed on this thread: flush waits for its digests anyway,
  /// and handing a few KiB to another thread cost more (wake-ups, context switches) than hashing it.
  static let inlineHashLimit = 64 << 10

  /// Writes and hashes the buffered bytes on this thread (after any hashing in flight, so the
  /// digests stay in order).
  private func consumeInline() throws {
    let block = UnsafeRawBufferPointer(rebasing: buffers[current][..<filled])
    try reserve?.admitContent(adding: block.count)
    waitForHashing()
    for digest in [sha256, extra, md5] { digest?.update(block) }
    crc32c?.update(block)
    try put(block)
    current = 1 - current
    filled = 0
  }

  private func consumeBuffered() throws {
    let block = UnsafeRawBufferPointer(rebasing: buffers[current][..<filled])
    try consume(block)
    // The other buffer's hashing was waited for before this block's began: it is free.
    current = 1 - current
    filled = 0
  }

  /// Starts hashing one block (after the previous block's hashing, so digests stay in order)
  /// and writes it meanwhile.
  private func consume(_ block: UnsafeRawBufferPointer) throws {
    try reserve?.admitContent(adding: block.count)
    waitForHashing()
    let digests = [sha256, extra].compactMap { $0 }
    if !digests.isEmpty || md5 != nil || crc32c != nil {
      let group = DispatchGroup()
      let queue = DispatchQueue.global(qos: .userInitiated)
      if !digests.isEmpty {
        let work = BlockHashing(digests: digests, block: block)
        queue.async(group: group) { work.run() }
      }
      if let md5 {
        let work = BlockHashing(digests: [md5], block: block)
        queue.async(group: group) { work.run() }
      }
      if let crc32c {
        let work = BlockHashing(digests: [], crc32c: crc32c, block: block)
        queue.async(group: group) { work.run() }
      }
      hashing = group
    }
    try put(block)
  }

  private func waitForHashing() {
    hashing?.wait()
    hashing = nil
  }

  private func put(_ block: UnsafeRawBufferPointer) throws {
    let start: Int64
    if let position {
      try POSIX.writeAll(fd, block, at: position, path: path)
      start = position
      self.position = position + Int64(block.count)
    } else {
      try POSIX.writeAll(fd, block, path: path)
      start = appended
      appended += Int64(block.count)
    }
    POSIX.startWriteback(fd, offset: start, count: block.count)
  }
}

@available(*, unavailable)
extension BlockSink: Sendable {}

/// Digest updates handed to another thread; the caller (the sink, the verifier) waits for them
/// before it touches the digests or the block again (or frees it), which is what makes the
/// unchecked sendability sound.
final class BlockHashing: @unchecked Sendable {
  let digests: [Digest]
  let crc32c: RunningCRC32C?
  let block: UnsafeRawBufferPointer
  init(digests: [Digest], crc32c: RunningCRC32C? = nil, block: UnsafeRawBufferPointer) {
    self.digests = digests
    self.crc32c = crc32c
    self.block = block
  }
  func run() {
    for digest in digests { digest.update(block) }
    crc32c?.update(block)
  }
}
