/// What a restore asks of a content store other than the data directory's (S3), which it fills
/// before the restored catalog names anything: whether it is empty, and a blob placed at the
/// address its row names.
package protocol RestorableContent: ContentStore {
  /// Something the store already holds, in words (a blob, a store's identity); nil when empty.
  func firstHeld() throws -> String?
  /// Makes `staged` (its bytes already checked against its hash) durable at `address`.
  func placeRestored(_ staged: StagedBlob, at address: BlobAddress) throws
}
