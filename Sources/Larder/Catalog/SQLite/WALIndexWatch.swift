import Foundation

/// Tells whether anyone committed to a SQLite catalog by reading the WAL-index header in its
/// `-shm` file: one `pread` instead of `PRAGMA data_version`'s read transaction.
///
/// `PRAGMA data_version` was the largest single cost of a cached small download (about a tenth
/// of the server's CPU per request, measured with perf): it begins and ends a read transaction
/// on every lookup. Every SQLite connection on the file, in any process, commits by rewriting
/// the same header in shared memory, and the header's `iChange` counter goes up by one each
/// time, before the commit returns. The format is SQLite's documented WAL-index format
/// (sqlite.org/walformat.html: two copies of a 48-byte header at the start of the `-shm` file,
/// written second copy first), which every SQLite version sharing a file must agree on.
///
/// The file is read with `pread`, never mapped: a shared-memory file that shrank would stop a
/// mapped read with `SIGBUS`, a short read is only a fallback. A header caught mid-write (its
/// two copies differ) is read again; when it stays unreadable the caller falls back to
/// `PRAGMA data_version`. The stamps live in a range of their own (bit 62 set), so a
/// connection that sees a stamp after a `data_version` number, or the other way round, counts
/// it as a change, never as sameness.
///
/// ```swift
/// let watch = WALIndexWatch(databasePath: "data/larder.sqlite")
/// let before = watch?.stamp()       // unchanged stamp ⇒ nobody committed in between
/// ```
package final class WALIndexWatch: Sendable {
  private let descriptor: Int32

  /// Bytes of one header copy; the file starts with two.
  static let headerSize = 48
  /// `WALINDEX_MAX_VERSION`, the header's `iVersion` since SQLite 3.7.0.
  static let indexVersion: UInt32 = 3_007_000
  /// Set on every stamp, so stamps never equal a `PRAGMA data_version` value (a small counter).
  static let stampTag: Int64 = 1 << 62

  /// Opens `<databasePath>-shm`; nil when it is not there (a connection not in WAL mode, or
  /// none opened yet), in which case the caller keeps asking SQLite.
  package init?(databasePath: String) {
    let fd = open(databasePath + "-shm", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    // Checked before the object exists: a failed initialiser of a whole object would still run
    // `deinit`, and closing here as well would close a number another thread may reuse.
    guard Self.stamp(reading: fd) != nil else {
      POSIX.close(fd)
      return nil
    }
    descriptor = fd
  }

  deinit { POSIX.close(descriptor) }

  /// The header's commit counter, tagged; nil when the header cannot be read consistently.
  package func stamp() -> Int64? { Self.stamp(reading: descriptor) }

  private static func stamp(reading fd: Int32) -> Int64? {
    withUnsafeTemporaryAllocation(byteCount: 2 * headerSize, alignment: 8) { buffer in
      for _ in 0..<4 {
        let count = pread(fd, buffer.baseAddress, buffer.count, 0)
        guard count == buffer.count else { return nil }
        if let stamp = stamp(header: UnsafeRawBufferPointer(buffer)) { return stamp }
      }
      return nil
    }
  }

  /// The stamp in the first 96 bytes of a `-shm` file: nil unless both header copies are
  /// equal (a writer is not halfway), initialised and of the known version.
  static func stamp(header: UnsafeRawBufferPointer) -> Int64? {
    guard header.count >= 2 * headerSize,
      memcmp(header.baseAddress!, header.baseAddress! + headerSize, headerSize) == 0,
      header.loadUnaligned(fromByteOffset: 0, as: UInt32.self) == indexVersion,
      header[12] == 1  // isInit
    else { return nil }
    return stampTag | Int64(header.loadUnaligned(fromByteOffset: 8, as: UInt32.self))  // iChange
  }
}
