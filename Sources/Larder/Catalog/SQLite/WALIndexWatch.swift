internal import CSQLite
import Foundation

/// Tells whether anyone committed to a SQLite catalog by reading the WAL-index header in shared
/// memory: a 96-byte copy instead of `PRAGMA data_version`'s read transaction.
///
/// `PRAGMA data_version` was the largest single cost of a cached small download (about a tenth
/// of the server's CPU per request, measured with perf): it begins and ends a read transaction
/// on every lookup. Every SQLite connection on the file, in any process, commits by rewriting
/// the same header in the `-shm` file, and the header's `iChange` counter goes up by one each
/// time, before the commit returns. The format is SQLite's documented WAL-index format
/// (sqlite.org/walformat.html: two copies of a 48-byte header at the start of the `-shm` file,
/// written second copy first), which every SQLite version sharing a file must agree on.
///
/// The header is read where SQLite mapped it for `connection` (the VFS's `xShmMap`), never
/// through a descriptor of our own: POSIX locks belong to the process and the file, so closing
/// any descriptor of the `-shm` file would drop the locks SQLite holds on it, and another
/// process could then rebuild the index under our connections. The mapping lives as long as
/// the connection, which the watch keeps open; while it is open SQLite holds the lock that
/// stops any process from truncating the file. A header caught mid-write (its two copies
/// differ) is read again; when it stays unreadable there is no stamp, and ``ObjectCache`` reads
/// the row instead of trusting what it holds.
///
/// ```swift
/// let watch = WALIndexWatch(connection: writer)
/// let before = watch?.stamp()       // unchanged stamp ⇒ nobody committed in between
/// ```
/// `@unchecked Sendable`: after `init` the connection is only kept alive, never used, and the
/// mapped header is only read.
package final class WALIndexWatch: @unchecked Sendable {
  private let connection: SQLiteDatabase
  private let index: UnsafeRawPointer

  /// Bytes of one header copy; the index starts with two.
  static let headerSize = 48
  /// `WALINDEX_MAX_VERSION`, the header's `iVersion` since SQLite 3.7.0.
  static let indexVersion: UInt32 = 3_007_000

  /// The watch over `connection`'s file; nil when the connection is not in WAL mode or its
  /// index holds no valid header yet.
  package init?(connection: SQLiteDatabase) {
    // Mapping asks the VFS for shared memory, which it would create for a file in another
    // journal mode too: only a WAL file has an index to read.
    guard (try? connection.row("PRAGMA journal_mode", []))??.string("journal_mode") == "wal",
      let index = larder_sqlite_wal_index(connection.handle)
    else { return nil }
    self.connection = connection
    self.index = index
    guard stamp() != nil else { return nil }
  }

  /// The header's commit counter; nil when the header cannot be read consistently.
  package func stamp() -> Int64? {
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 2 * Self.headerSize) { buffer in
      for _ in 0..<4 {
        larder_sqlite_copy_wal_header(index, buffer.baseAddress!)
        if let stamp = Self.stamp(header: UnsafeRawBufferPointer(buffer)) { return stamp }
      }
      return nil
    }
  }

  /// The stamp in the first 96 bytes of a WAL-index: nil unless both header copies are equal
  /// (a writer is not halfway), initialised and of the known version.
  static func stamp(header: UnsafeRawBufferPointer) -> Int64? {
    guard header.count >= 2 * headerSize,
      memcmp(header.baseAddress!, header.baseAddress! + headerSize, headerSize) == 0,
      header.loadUnaligned(fromByteOffset: 0, as: UInt32.self) == indexVersion,
      header[12] == 1  // isInit
    else { return nil }
    return Int64(header.loadUnaligned(fromByteOffset: 8, as: UInt32.self))  // iChange
  }
}
