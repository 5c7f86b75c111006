import Foundation

/// What a restore asks of the content store the restored store will use (the data directory's
/// files, or S3), which it fills before the restored catalog names anything: whether it is
/// empty, a blob placed at the address its row names, and one step that makes them all durable.
package protocol RestorableContent: ContentStore {
  /// Something the store already holds, in words (a blob, a store's identity); nil when empty.
  func firstHeld() throws -> String?
  /// Makes `staged` (its bytes already checked against its hash) stored at `address`; durable
  /// after ``finishRestore()``.
  func placeRestored(_ staged: StagedBlob, at address: BlobAddress) throws
  /// Makes every placed blob durable, before the catalog that names them is put in place.
  func finishRestore() throws
  /// Whether blobs stay at the fences their rows name (S3); false: every row at fence 0.
  var restoresFences: Bool { get }
}

extension LocalContentStore: RestorableContent {
  package func firstHeld() throws -> String? {
    if let identity = try recordedStoreIdentities().sorted().first { return "store \(identity)'s identity" }
    return POSIX.listDirectory(blobs.blobsPath).sorted().first.map { "blobs/sha256/\($0)" }
  }

  /// Renamed into place unsynced: ``finishRestore()`` flushes them all at once.
  package func placeRestored(_ staged: StagedBlob, at address: BlobAddress) throws {
    guard case .file(let path) = staged.bytes else {
      throw LarderError.invalidArgument("a restored blob is a staged file")
    }
    let target = blobs.path(forHex: address.hex)
    try POSIX.makeDirectory((target as NSString).deletingLastPathComponent)
    guard POSIX.rename(path, target) else { throw LarderError.posix("rename", target) }
  }

  /// One flush of the filesystem for every blob, its name and its directories.
  package func finishRestore() throws { try POSIX.syncFilesystem(of: blobs.blobsPath) }

  package var restoresFences: Bool { false }
}
