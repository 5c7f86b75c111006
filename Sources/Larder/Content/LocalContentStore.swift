import Foundation
import LarderCrypto

/// Content as files under the data directory's `blobs/` (the embedded default), which this
/// store alone places, reads, moves aside and removes.
///
/// Writers link a blob's file inside the catalog's write transaction that inserts its row
/// (``LocalIngest``), so under the write lock a file without a row is never a commit on its way:
/// strays need no age, and a missing file is rechecked under the lock. A blob's file moves to
/// `trash/` inside the transaction that deletes its row and is unlinked after the commit; a
/// crash in between leaves a trash entry, which recovery puts back or removes (I1, I2).
struct LocalContentStore: ContentStore, LocalFileContent {
  let blobs: BlobStore
  let catalog: Catalog

  var location: String { blobs.blobsDirectory.path }

  func place(of address: BlobAddress) -> String { blobs.path(forHex: address.hex) }

  func location(of sha256: [UInt8]) -> String { blobs.path(for: sha256) }

  /// Nothing before the transaction: the link is made inside it, with the dedupe decision.
  func ingest(_ staged: StagedBlob, faults: FaultInjector) throws -> any ContentIngest {
    LocalIngest(staged: staged, blobs: blobs, catalog: catalog, faults: faults)
  }

  func open(sha256: [UInt8]) throws -> BlobReader { try blobs.open(sha256: sha256) }

  func read(_ sha256: [UInt8], range: Range<Int64>?, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    let reader = try open(sha256: sha256)
    let range = range.map { r -> Range<Int64> in
      let lower = min(max(0, r.lowerBound), reader.size)
      return lower..<max(lower, min(r.upperBound, reader.size))
    }
    try reader.forEachChunk(in: range, body)
  }

  var missingDescription: String { "the blob's file is missing" }

  /// A deletion commits with its row and its file waits in `trash/` until the unlink after the
  /// commit: an entry whose `blobs` row still exists (the delete never committed) goes back to
  /// its address, any other is removed, all under the write lock. An entry that vanished
  /// meanwhile is skipped.
  func recover(dryRun: Bool) throws -> ContentRecovery {
    let trashDirectory = blobs.trashDirectory.path
    let trash = POSIX.listDirectory(trashDirectory)
    guard !trash.isEmpty else { return ContentRecovery() }
    func settle(_ db: Database) throws -> ContentRecovery {
      var recovery = ContentRecovery()
      for name in trash {
        let path = "\(trashDirectory)/\(name)"
        let isFile = POSIX.lstat(path).map { ($0.st_mode & S_IFMT) == S_IFREG } ?? false
        // Only a regular file named exactly by a digest goes back, and never over a blob already
        // in place (one uploaded again since): a planted symlink, a duplicate or any other name
        // is simply removed.
        if isFile, BlobTreeWalker.isHex(name, count: 64), let digest = Hex.decode(name),
          POSIX.lstat(blobs.path(forHex: name)) == nil,
          try db.row("SELECT 1 FROM blobs WHERE sha256 = ?", [digest]) != nil
        {
          if dryRun {
            recovery.restored.append(path)
            continue
          }
          let target = blobs.path(forHex: name)
          let leaf = (target as NSString).deletingLastPathComponent
          try POSIX.makeDirectory(leaf)
          if !POSIX.rename(path, target) {
            if errno == ENOENT { continue }
            throw LarderError.posix("rename", path)
          }
          try POSIX.fsyncDirectory(leaf)
          recovery.restored.append(path)
        } else if dryRun || POSIX.unlink(path) || errno != ENOENT {
          recovery.removed.append(path)
        }
      }
      if !dryRun, !(recovery.restored.isEmpty && recovery.removed.isEmpty) {
        try POSIX.fsyncDirectory(trashDirectory)
      }
      return recovery
    }
    return dryRun ? try catalog.read(settle) : try catalog.write(settle)
  }

  func removeUnreferenced(_ candidates: [[UInt8]], faults: FaultInjector) throws -> (blobs: Int, bytes: Int64) {
    let removed: (trash: [String], rows: Int, bytes: Int64)
    do {
      removed = try trash(candidates, faults: faults)
    } catch {
      // A failed COMMIT leaves the rows but the files in trash/ (I1 broken): put them back
      // now, under the write lock, rather than at the next open. The caller holds gc.lock.
      _ = try? recover(dryRun: false)
      throw error
    }
    try faults.hit(.gcAfterCommit)
    // No fsync after the unlinks: an unlink lost in a crash leaves a trash entry whose row is
    // gone, which recovery removes. Under load every fsync costs a journal commit.
    for path in removed.trash { POSIX.unlink(path) }
    return (removed.rows, removed.bytes)
  }

  /// One write transaction: delete the rows still unreferenced, move their files to `trash/`.
  private func trash(_ candidates: [[UInt8]], faults: FaultInjector) throws
    -> (trash: [String], rows: Int, bytes: Int64)
  {
    let trashDirectory = blobs.trashDirectory.path
    return try catalog.write(keys: UnreferencedBlobs.keys(candidates)) { db in
      var moved: [(trash: String, original: String)] = []
      var bytes: Int64 = 0
      do {
        let rows = try UnreferencedBlobs.delete(candidates, returning: "sha256, size", in: db)
        for (index, row) in rows.enumerated() {
          if index == rows.count / 2 && index > 0 { try faults.hit(.gcMidBatch) }
          guard let sha256 = row.bytes("sha256") else { continue }
          let hex = Hex.encode(sha256)
          let original = blobs.path(forHex: hex)
          let trash = "\(trashDirectory)/\(hex)"
          if POSIX.rename(original, trash) {
            moved.append((trash, original))
            bytes += row.int("size") ?? 0
          } else if errno != ENOENT {
            // Missing is fine (a quarantined blob); anything else must not commit the delete.
            throw LarderError.posix("rename", original)
          }
        }
        if !moved.isEmpty { try POSIX.fsyncDirectory(trashDirectory) }
        try faults.hit(.gcAfterTrash)
        return (moved.map(\.trash), rows.count, bytes)
      } catch {
        // The rows come back with the rollback; so must the files, before anyone (an upload
        // deduping against a row) can look. We still hold the write lock.
        for entry in moved { POSIX.rename(entry.trash, entry.original) }
        throw error
      }
    }
  }

  /// Files under `blobs/` that no row names, found on a reader and settled in batches under
  /// the write lock (``BlobTreeWalker/settleStrays(_:catalog:remove:lock:)``); `oldest` does not
  /// apply (see the type's documentation).
  func forEachStray(olderThan oldest: Date, remove: Bool, _ body: ([ContentStray]) throws -> Void) throws {
    var pending: [BlobTreeWalker.Entry] = []
    func settle() throws {
      defer { pending.removeAll(keepingCapacity: true) }
      try body(
        try BlobTreeWalker.settleStrays(pending, catalog: catalog, remove: remove).map { stray in
          var hex: String?
          if case .blob(let h, _) = stray.entry { hex = h }
          return ContentStray(
            hex: hex, place: stray.path, size: stray.size,
            detail: !stray.removable
              ? "a directory where none belongs"
              : hex == nil ? "not at a blob address" : "no blobs row names it",
            removable: stray.removable, removed: stray.removed,
            // A regular file at a blob address is what a write leaves when it dies between
            // linking and committing; anything else under blobs/ is a fault.
            reclaimable: stray.isUncommittedBlob)
        })
    }
    try BlobTreeWalker(root: blobs.blobsDirectory.path).forEachUnreferenced(catalog: catalog) {
      unreferenced in
      pending.append(contentsOf: unreferenced)
      if pending.count >= 500 { try settle() }
    }
    if !pending.isEmpty { try settle() }
  }

  func inspect(_ address: BlobAddress) throws -> StoredContent? {
    let path = place(of: address)
    guard let st = POSIX.lstat(path) else {
      guard errno == ENOENT else { throw LarderError.posix("stat", path) }
      return nil
    }
    return StoredContent(
      size: Int64(st.st_size), isRegular: (st.st_mode & S_IFMT) == S_IFREG, mode: st.st_mode & 0o7777)
  }

  /// Opened without following links; with `md5`, both digests read each chunk on two cores, so
  /// verification is bounded by the slower hash (or the disk), not by the two in turn.
  func digest(_ address: BlobAddress, md5: Bool, deep: Bool, buffer: inout [UInt8]) throws -> ContentDigest? {
    let path = place(of: address)
    let fd = try POSIX.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    defer { POSIX.close(fd) }
    let digest = Digest(.sha256)
    let md5Digest = md5 ? Digest(.md5) : nil
    var offset: Int64 = 0
    while true {
      let n = try buffer.withUnsafeMutableBytes { try POSIX.readFully(fd, into: $0, at: offset, path: path) }
      if n == 0 { break }
      buffer.withUnsafeBytes {
        let chunk = UnsafeRawBufferPointer(rebasing: $0[0..<n])
        guard let md5Digest else { return digest.update(chunk) }
        let group = DispatchGroup()
        let md5Work = BlockHashing(digests: [md5Digest], block: chunk)
        DispatchQueue.global(qos: .userInitiated).async(group: group) { md5Work.run() }
        digest.update(chunk)
        group.wait()
      }
      offset += Int64(n)
      if n < buffer.count { break }
    }
    return ContentDigest(sha256: digest.finalize(), md5: md5Digest?.finalize(), bytes: offset)
  }

  func isStillMissingUnderLock(_ address: BlobAddress) -> Bool { !POSIX.exists(place(of: address)) }

  /// Moves the file to `quarantine/<hex>` and marks its files, in one write transaction.
  func quarantine(_ address: BlobAddress) throws -> Bool {
    let path = place(of: address)
    let directory = blobs.quarantineDirectory.path
    return try catalog.write { db in
      try ContentQuarantine.mark(address.sha256, in: db)
      var target = "\(directory)/\(address.hex)"
      if POSIX.exists(target) { target += ".\(SecureRandom.hexIdentifier(byteCount: 4))" }
      guard POSIX.rename(path, target) else { throw LarderError.posix("rename", path) }
      try POSIX.fsyncDirectory(directory)
      try POSIX.fsyncDirectory((path as NSString).deletingLastPathComponent)
      return true
    }
  }

  func restoreReadOnly(_ address: BlobAddress) -> Bool { POSIX.chmod(place(of: address), 0o444) }

  func recordedStoreIdentities() throws -> Set<String> { try blobs.recordedStoreIdentities() }
  func recordStoreIdentity(_ identity: String) throws { try blobs.recordStoreIdentity(identity) }
  func forgetStoreIdentity(_ identity: String) throws { try blobs.forgetStoreIdentity(identity) }
}

/// Marking a blob's files quarantined, the same for every store.
package enum ContentQuarantine {
  /// Marks every file of `sha256` quarantined, or, when no file uses it, drops its row: nothing
  /// needs the row to answer "corrupt", and a row with nothing behind it would be a missing
  /// blob at the next check.
  package static func mark(_ sha256: [UInt8], in db: Database) throws {
    try db.execute("UPDATE files SET quarantined = 1 WHERE blob_sha256 = ?", [sha256])
    if db.changes == 0 { try dropIfUnused(sha256, in: db) }
  }

  /// Deletes the row of `sha256` if no file uses it; returns whether it did.
  @discardableResult
  package static func dropIfUnused(_ sha256: [UInt8], in db: Database) throws -> Bool {
    try db.execute(
      "DELETE FROM blobs WHERE sha256 = ? AND NOT EXISTS (SELECT 1 FROM files WHERE blob_sha256 = ?)",
      [sha256, sha256])
    return db.changes > 0
  }
}
