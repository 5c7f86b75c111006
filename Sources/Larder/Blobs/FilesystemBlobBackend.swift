import Foundation

/// Blobs as read-only files under the data directory's `blobs/sha256/ab/cd/`: the
/// ``BlobStore`` seen through ``BlobBackend`` (a hard link of the
/// staged file, fsync'ed directories; downloads may still take the descriptor for `sendfile`
/// through ``BlobStore/open(sha256:)``). Every address here has fence 0: the link happens under
/// the write lock with the dedupe decision, which is already safe (ARCHITECTURE.md, "Invariants and
/// the write path"), so the on-disk layout never carries a fence and one is ignored.
public struct FilesystemBlobBackend: BlobBackend {
  public let store: BlobStore

  public init(store: BlobStore) { self.store = store }

  public var location: String { store.blobsDirectory.path }

  /// A link: cheap, and it belongs under the write lock with the dedupe decision.
  public var publishesInsideTransaction: Bool { true }

  /// Links the staged file into place (``BlobStore/place(_:)``). As there, call it under the
  /// catalog's write lock after finding no `blobs` row: a file already at the address is then
  /// a crash's leftover and is replaced by the verified copy.
  public func publish(_ staged: StagedBlob, at address: BlobAddress) throws {
    _ = try store.place(staged)
  }

  public func storedSize(of address: BlobAddress) throws -> Int64? {
    BlobTreeWalker.sizeAndModified(of: store.path(forHex: address.hex))?.size
  }

  public func read(_ address: BlobAddress, range: Range<Int64>?, _ body: (UnsafeRawBufferPointer) throws -> Void)
    throws
  {
    let reader = try BlobReader(path: store.path(forHex: address.hex))
    let range = range.map { r -> Range<Int64> in
      let lower = min(max(0, r.lowerBound), reader.size)
      return lower..<max(lower, min(r.upperBound, reader.size))
    }
    try reader.forEachChunk(in: range, chunkSize: 256 << 10, body)
  }

  public func remove(_ address: BlobAddress) throws {
    let path = store.path(forHex: address.hex)
    guard POSIX.unlink(path) || errno == ENOENT else { throw LarderError.posix("unlink", path) }
  }

  public func forEachStoredBlob(dated body: (_ address: BlobAddress, _ size: Int64, _ stored: Date) throws -> Void)
    throws
  {
    try BlobTreeWalker(root: store.blobsDirectory.path).forEachLeaf { entries in
      for case .blob(let hex, let path) in entries {
        guard let info = BlobTreeWalker.sizeAndModified(of: path) else { continue }  // just collected
        try body(BlobAddress(hex: hex), info.size, info.modified)
      }
    }
  }
}
