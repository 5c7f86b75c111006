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
  public let path: String
  public let sha256: [UInt8]
  public let size: Int64
  /// What libmagic found in the first bytes.
  public let contentType: String
  /// `<id>/<data>` of the resumable upload whose content this is, assembled in the shared store
  /// (`uploads/<id>/<data>`) rather than in a local file; nil for a local file (`path`).
  public let assembledUpload: String?
  /// Reads an assembled upload's content (its MD5, when asked).
  private let readAssembled: (@Sendable ((UnsafeRawBufferPointer) throws -> Void) throws -> Void)?
  private let descriptor: OwnedDescriptor
  private let removeOnDiscard: Bool
  private let knownMD5: Mutex<[UInt8]?>
  private let knownCRC32C = Mutex<UInt32?>(nil)
  private let assembledDiscarded = Mutex(false)

  init(
    path: String, descriptor: OwnedDescriptor, sha256: [UInt8], md5: [UInt8]?, size: Int64, contentType: String,
    removeOnDiscard: Bool
  ) {
    self.path = path
    self.descriptor = descriptor
    self.sha256 = sha256
    knownMD5 = Mutex(md5)
    self.size = size
    self.contentType = contentType
    self.removeOnDiscard = removeOnDiscard
    assembledUpload = nil
    readAssembled = nil
  }

  /// Content that a resumable upload assembled in the shared store: its SHA-256 is the running
  /// hash the upload kept, its type what libmagic found in its first bytes. `path` is empty and
  /// nothing is local; a backend publishes it by a server-side copy.
  init(
    assembledUpload key: String, sha256: [UInt8], size: Int64, contentType: String,
    read: @escaping @Sendable ((UnsafeRawBufferPointer) throws -> Void) throws -> Void
  ) {
    path = ""
    // Nothing to close: -1 is a descriptor closed from the start.
    descriptor = OwnedDescriptor(-1)
    self.sha256 = sha256
    knownMD5 = Mutex(nil)
    self.size = size
    self.contentType = contentType
    removeOnDiscard = false
    assembledUpload = key
    readAssembled = read
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
    if let readAssembled {
      let md5 = Digest(.md5)
      try readAssembled { md5.update($0) }
      digest = md5.finalize()
    } else {
      digest = try MD5Backfill.md5(ofFile: path)
    }
    knownMD5.withLock { $0 = digest }
    return digest
  }

  /// Reads the staged bytes once, in order: the local file, or the upload assembled in the shared store.
  /// - Throws: an I/O error, or what `body` throws.
  public func read(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    if let readAssembled {
      try withoutActuallyEscaping(body) { body in try readAssembled { try body($0) } }
    } else {
      try BlobReader(path: path).forEachChunk(body)
    }
  }

  /// The CRC32C when ``computeChecksums()`` ran.
  public var crc32c: UInt32? { knownCRC32C.withLock { $0 } }

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
    assembledUpload == nil ? descriptor.isOpen : !assembledDiscarded.withLock { $0 }
  }

  /// Removes the temporary name (the content lives on under its address if it was committed).
  /// Only the first call does anything.
  public func discard() {
    assembledDiscarded.withLock { $0 = true }
    let path = path
    let remove = removeOnDiscard
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
    if sha == nil {
      // Only the address is computed here; MD5 only when a caller asks (``computeMD5()``).
      let s = Digest(.sha256)
      try BlobReader(path: path).forEachChunk { s.update($0) }
      sha = s.finalize()
    }
    try owned.use(path: path) { fd in
      try POSIX.fsync(fd, path: path)
      try POSIX.fchmod(fd, 0o444, path: path)
    }
    return StagedBlob(
      path: path, descriptor: owned, sha256: sha!, md5: knownMD5, size: size,
      contentType: ContentSniffer.shared.mimeType(of: head), removeOnDiscard: removeOnDiscard)
  }
}
