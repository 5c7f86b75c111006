import Larder

extension S3ContentStore: RestorableContent {
  /// Another store's identity first, then any blob: even the snapshot's own store's content is
  /// refused (that may be the live store, and two catalogs on one prefix would collect each
  /// other's blobs).
  package func firstHeld() throws -> String? {
    if let identity = try recordedStoreIdentities().sorted().first { return "store \(identity)'s identity" }
    struct Found: Error { let address: BlobAddress }
    do {
      try forEachStoredBlob { address, _, _ in throw Found(address: address) }
    } catch let found as Found {
      return "blob \(found.address)"
    }
    return nil
  }

  package func placeRestored(_ staged: StagedBlob, at address: BlobAddress) throws { try publish(staged, at: address) }

  /// An acknowledged PUT is durable.
  package func finishRestore() {}

  package var restoresFences: Bool { true }
}
