import LarderCrypto

/// A CRC32C (GCS's `crc32c`) kept up as bytes stream in, beside the SHA-256, so that no answer
/// has to read the content back for it. A reference type, as ``Digest`` is, so that
/// ``BlockSink`` can hand it to its hashing task and an upload session can keep it between
/// appends.
final class RunningCRC32C: @unchecked Sendable {
  private var crc = CRC32C()

  init() {}

  func update(_ bytes: UnsafeRawBufferPointer) { crc.update(bytes) }

  /// The checksum of the bytes seen so far.
  var value: UInt32 { crc.value }

  func copy() -> RunningCRC32C {
    let other = RunningCRC32C()
    other.crc = crc
    return other
  }
}
