import Foundation
import LarderCrypto
import Synchronization

/// Verified, durable content waiting to be committed into the catalog.
///
/// It keeps its temp file (and the lock on it) until ``discard()``, which ``FileStore`` calls
/// once the commit is done, whatever its outcome. The descriptor is owned by one
/// ``OwnedDescriptor``: a discard racing another (or the release) removes the name and closes
/// the descriptor exactly once.
public final class StagedBlob: Sendable {
  /// Where staged bytes are.
  public enum Bytes: Sendable, Equatable {
    /// A local file, fsync'ed and read-only, held open until ``StagedBlob/discard()``.
    case file(path: String)
    /// Content a resumable upload assembled in the shared store, `<id>/<data>` under its
    /// `uploads/`: nothing is local, and a backend publishes it by a server-side copy.
    case assembledUpload(key: String)
  }

  /// Where these staged bytes are.
  public let bytes: Bytes
  public let sha256: [UInt8]
  public let size: Int64
  /// What libmagic found in the first bytes.
  public let contentType: String
  /// What holds the staged bytes until ``discard()``.
  private enum Holder: Sendable {
    /// The open (and `flock`ed) local file; its name goes with it when `removeOnDiscard`.
    case file(OwnedDescriptor, path: String, removeOnDiscard: Bool)
    /// Reads the assembled content (its MD5 and CRC32C, when asked).
    case assembled(read: @Sendable ((UnsafeRawBufferPointer) throws -> Void) throws -> Void)
  }
  private let holder: Holder
  /// Set by the first ``discard()``.
  private let discarded = Atomic<Bool>(false)
  private let knownMD5: Mutex<[UInt8]?>
  private let knownCRC32C: Mutex<UInt32?>

  init(
    path: String, descriptor: OwnedDescriptor, sha256: [UInt8], md5: [UInt8]?, size: Int64,
    contentType: String,
    removeOnDiscard: Bool, crc32c: UInt32? = nil
  ) {
    bytes = .file(path: path)
    holder = .file(descriptor, path: path, removeOnDiscard: removeOnDiscard)
    self.sha256 = sha256
    knownMD5 = Mutex(md5)
    knownCRC32C = Mutex(crc32c)
    self.size = size
    self.contentType = contentType
  }

  /// Content that a resumable upload assembled in the shared store: its SHA-256 is the running
  /// hash the upload kept, its type what libmagic found in its first bytes.
  init(
    assembledUpload key: String, sha256: [UInt8], size: Int64, contentType: String,
    read: @escaping @Sendable ((UnsafeRawBufferPointer) throws -> Void) throws -> Void
  ) {
    bytes = .assembledUpload(key: key)
    holder = .assembled(read: read)
    self.sha256 = sha256
    knownMD5 = Mutex(nil)
    knownCRC32C = Mutex(nil)
    self.size = size
    self.contentType = contentType
  }

  /// The local file's path (``Bytes/file(path:)``); nil for assembled content, which has none.
  public var localPath: String? {
    guard case .file(let path) = bytes else { return nil }
    return path
  }

  /// Computes the MD5 and CRC32C now (``computeChecksums()``) when that is a local read of at
  /// most `limit` bytes, still in the page cache. Content assembled in a remote store would be
  /// read back whole over the network before the answer: it is left to the backfill.
  public func computeChecksumsIfLocal(upTo limit: Int64) throws {
    guard size <= limit, case .file = holder else { return }
    try computeChecksums()
  }

  deinit { discard() }

  public var sha256Hex: String { Hex.encode(sha256) }

  /// The MD5 when it is known: a client gave one and it was verified, or ``computeMD5()`` ran.
  /// Uploads do not hash MD5 otherwise (it is off the critical path; see ``MD5Backfill``).
  public var md5: [UInt8]? { knownMD5.withLock { $0 } }

  /// The MD5, reading the staged file once when it is not known yet (then remembered).
  /// - Throws: an I/O error.
  public func computeMD5() throws -> [UInt8] {
    if let md5 { return md5 }
    let digest: [UInt8]
    switch holder {
    case .assembled(let read):
      let md5 = Digest(.md5)
      try read { md5.update($0) }
      digest = md5.finalize()
    case .file(_, let path, _):
      digest = try MD5Backfill.md5(ofFile: path)
    }
    knownMD5.withLock { $0 = digest }
    return digest
  }

  /// Reads the staged bytes once, in order: the local file, or the upload assembled in the shared store.
  /// - Throws: an I/O error, or what `body` throws.
  public func read(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    switch holder {
    case .assembled(let read):
      try withoutActuallyEscaping(body) { body in try read { try body($0) } }
    case .file(_, let path, _):
      try BlobReader(path: path).forEachChunk(body)
    }
  }

  /// The CRC32C when it is known: kept while the bytes were written, or ``computeChecksums()`` ran.
  public var crc32c: UInt32? { knownCRC32C.withLock { $0 } }

  /// Records checksums that were kept up while these very bytes streamed in (a resumable
  /// upload's session), so that nothing reads them back for them; one known already stays.
  func remember(md5: [UInt8]?, crc32c: UInt32?) {
    if let md5 { knownMD5.withLock { $0 = $0 ?? md5 } }
    if let crc32c { knownCRC32C.withLock { $0 = $0 ?? crc32c } }
  }

  /// The MD5 and the CRC32C, reading the staged bytes once when either is not known yet (then
  /// remembered): what a commit of small content records on its blob row.
  /// - Throws: an I/O error.
  public func computeChecksums() throws {
    if md5 != nil, crc32c != nil { return }
    let digest = md5 == nil ? Digest(.md5) : nil
    var crc = CRC32C()
    try read {
      digest?.update($0)
      crc.update($0)
    }
    if let digest {
      let value = digest.finalize()
      knownMD5.withLock { $0 = value }
    }
    let value = crc.value
    knownCRC32C.withLock { $0 = value }
  }

  /// True until ``discard()``.
  public var isStaged: Bool {
    switch holder {
    case .file(let descriptor, _, _): descriptor.isOpen
    case .assembled: !discarded.load(ordering: .acquiring)
    }
  }

  /// Removes the temporary name (the content lives on under its address if it was committed).
  /// Only the first call does anything.
  public func discard() {
    discarded.store(true, ordering: .releasing)
    guard case .file(let descriptor, let path, let remove) = holder else { return }
    descriptor.close { _ in if remove { POSIX.unlink(path) } }
  }

  /// Stages an existing file (a finished resumable upload), hashing its SHA-256 unless given.
  /// Its MD5 is `knownMD5`, or computed later when asked (``computeMD5()``).
  ///
  /// The file must be on the same filesystem as the store; it is fsync'ed and made read-only.
  /// With `removeOnDiscard`, the name is removed after the commit.
  public static func adopting(
    path: String, sha256 knownSHA256: [UInt8]? = nil, md5 knownMD5: [UInt8]? = nil, removeOnDiscard: Bool
  ) throws -> StagedBlob {
    // Owned at once: on any failure below, releasing it closes the descriptor (once).
    let owned = OwnedDescriptor(try POSIX.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW))
    let (size, head) = try owned.use(path: path) { fd in
      let size = try POSIX.fileSize(fd, path: path)
      var head = [UInt8](repeating: 0, count: Int(min(Int64(ContentSniffer.headLength), size)))
      let n = try head.withUnsafeMutableBytes { try POSIX.readFully(fd, into: $0, at: 0, path: path) }
      head.removeLast(head.count - n)
      return (size, head)
    }
    var sha = knownSHA256
    var crc32c: UInt32?
    if sha == nil {
      // The address, and GCS's CRC32C in the same read; MD5 only when a caller asks (``computeMD5()``).
      let s = Digest(.sha256)
      var crc = CRC32C()
      try BlobReader(path: path).forEachChunk {
        s.update($0)
        crc.update($0)
      }
      sha = s.finalize()
      crc32c = crc.value
    }
    try owned.use(path: path) { fd in
      try POSIX.fsync(fd, path: path)
      try POSIX.fchmod(fd, 0o444, path: path)
    }
    return StagedBlob(
      path: path, descriptor: owned, sha256: sha!, md5: knownMD5, size: size,
      contentType: ContentSniffer.shared.mimeType(of: head), removeOnDiscard: removeOnDiscard, crc32c: crc32c)
  }
}
