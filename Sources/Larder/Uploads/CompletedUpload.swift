import Foundation
import LarderCrypto
import Synchronization

/// An upload whose last byte has arrived: durable, hashed and sniffed, not yet visible.
///
/// Hand it to ``UploadStore/publish(_:)`` (after asking the access policy with ``size``,
/// ``contentType`` and ``sha256Hex``) or ``UploadStore/reject(_:)``. Until then the upload
/// stays locked; one dropped unsettled is rolled back to its last acknowledged offset.
public final class CompletedUpload: Sendable {
  /// The upload as it will be recorded once published (offset = length).
  public let upload: Upload
  public let staged: StagedBlob
  let store: UploadStore
  /// nil for a final concatenation (its row is inserted when it is published).
  let session: UploadSession?
  /// The leases given back once it is settled: the upload's, and a final's partials'.
  let leases: [String]
  /// Published, rejected or rolled back: each happens once, whichever thread gets there first.
  private let settledFlag = Mutex(false)

  init(upload: Upload, staged: StagedBlob, store: UploadStore, session: UploadSession?, leases: [String]? = nil) {
    self.upload = upload
    self.staged = staged
    self.store = store
    self.session = session
    self.leases = leases ?? [upload.id]
  }

  deinit {
    if !isSettled { store.rollback(self) }
  }

  /// Marks it settled; false when it already was.
  func settle() -> Bool { settledFlag.withLock { settled in defer { settled = true }; return !settled } }

  /// Makes it unsettled again (a publish that failed leaves the upload to roll back).
  func unsettle() { settledFlag.withLock { $0 = false } }

  var isSettled: Bool { settledFlag.withLock { $0 } }

  public var size: Int64 { staged.size }
  /// The type libmagic found.
  public var contentType: String { staged.contentType }
  public var sha256Hex: String { staged.sha256Hex }
  /// The MD5 of the content, computed (once, reading the file) when first asked: resumable
  /// uploads do not hash MD5 as bytes arrive. Empty if the file cannot be read; callers that
  /// must know use `staged.computeMD5()`.
  public var md5: [UInt8] { (try? staged.computeMD5()) ?? [] }
  /// The object name it will be published under.
  public var name: String { upload.name ?? "" }
  /// The object's options, from the upload's metadata.
  public var objectOptions: ObjectWriteOptions { UploadStore.objectOptions(metadata: upload.metadata) }
}
