import Foundation
import LarderCrypto

/// One append (a tus `PATCH`) in progress: it holds the upload's lease until it ends.
///
/// ```swift
/// let append = try uploads.beginAppend(id: id, owner: uid, offset: 0)
/// try append.write(chunk)                 // streamed straight to uploads/<id>
/// switch try append.finish() {            // fsync, verify, commit the offset
/// case .progress(let upload): print(upload.offset)
/// case .complete(let done): _ = try uploads.publish(done)
/// }
/// ```
/// Bytes go to the file in 256 KiB blocks and are hashed (on another core) into copies of the session's digests
/// (a cold session has none: the finished file is then hashed once when staged); nothing is
/// acknowledged until ``finish()`` has fsync'ed the file and committed the offset, except at
/// checkpoints: a long append commits what it has received every ``UploadCheckpoints/bytes`` or
/// ``UploadCheckpoints/interval`` (tus: store as much of the received data as possible), so a
/// crash in the middle of one long PATCH keeps all but the last few MiB. Checkpoints never
/// commit the last byte of an upload (that needs the admission step's final say), nor bytes a
/// checksum guards (they are only known good at the end), nor appends begun without them.
/// ``abort(keepReceived:)`` (a dropped connection) keeps what arrived when no checksum guards it.
public final class UploadAppend {
  /// The upload before this append.
  public let upload: Upload
  /// The row as last committed: `upload` until the first checkpoint.
  private var committed: Upload
  private let checkpoints: UploadCheckpoints?
  private var lastCheckpoint = ContinuousClock.now
  /// The length in force for this append (declared now, or earlier, or by ``endUploadHere()``).
  public private(set) var length: Int64?
  public private(set) var received: Int64 = 0
  let store: UploadStore
  let session: UploadSession
  let checksum: UploadChecksum?
  private let checksumDigest: Digest?
  /// Buffers, hashes (into copies of the session's digests, when it has them) and writes at the
  /// upload's end.
  private let sink: BlockSink
  private var open = true

  private let sizeLimit: Int64?
  /// The body's length when the request declares it (`Content-Length`). No checkpoint is taken
  /// once all of it arrived: ``finish()`` commits the same offset a moment later, and a
  /// checkpoint there would double the per-request fsync and commit (an 8 MiB PATCH reached the
  /// 8 MiB checkpoint on its last chunk).
  public var expectedBodyLength: Int64?

  init(
    upload: Upload, length: Int64?, store: UploadStore, session: UploadSession, checksum: UploadChecksum?,
    sizeLimit: Int64?, checkpoints: UploadCheckpoints?, md5: Bool = false
  ) {
    self.upload = upload
    committed = upload
    // Bytes a checksum guards are known good only at the end.
    self.checkpoints = checksum == nil ? checkpoints : nil
    self.sizeLimit = sizeLimit
    self.length = length
    self.store = store
    self.session = session
    self.checksum = checksum
    let checksumDigest = checksum.map { Digest($0.algorithm) }
    self.checksumDigest = checksumDigest
    sink = BlockSink(
      fd: session.fd, path: session.path, sha256: session.sha256?.copy(), md5: md5 ? session.md5?.copy() : nil,
      extra: checksumDigest, crc32c: session.crc32c?.copy(), at: upload.offset - session.origin,
      reserve: store.larder.catalog.reserve)
  }

  /// Shared mode: when the catalog lease was last extended (a long append keeps it).
  private var leaseRenewed = ContinuousClock.now

  deinit { abort(keepReceived: false) }

  /// Appends bytes at the current end (buffered: they are written in 256 KiB blocks), and commits
  /// a checkpoint when one is due.
  /// - Throws: ``UploadError/exceedsLength(length:)``, ``LarderError/sizeLimitExceeded(limit:)`` or an
  ///   I/O error; the append is then over and nothing it wrote after its last checkpoint is kept.
  public func write(_ bytes: UnsafeRawBufferPointer) throws {
    precondition(open, "write after the append ended")
    if let length, upload.offset + received + Int64(bytes.count) > length {
      abort(keepReceived: false)
      throw UploadError.exceedsLength(length: length)
    }
    if let sizeLimit, upload.offset + received + Int64(bytes.count) > sizeLimit {
      abort(keepReceived: false)
      throw LarderError.sizeLimitExceeded(limit: sizeLimit)
    }
    do {
      try sink.write(bytes)
    } catch {
      abort(keepReceived: false)
      throw error
    }
    received += Int64(bytes.count)
    if let checkpoints { try checkpointIfDue(checkpoints) }
    if ContinuousClock.now - leaseRenewed > store.lease / 3 {
      do {
        try store.locker.renew(upload.id)
      } catch {
        abort(keepReceived: false)
        throw error
      }
      leaseRenewed = .now
    }
  }

  /// Makes the bytes [committed offset, `end`) durable and commits `end`: fsync'ed in the
  /// staging file on one node; in shared mode stored as a part or a piece (the file is then a
  /// cache), committed with the state that names them. `finishing`: a partial upload's last byte.
  private func commit(to end: Int64, finishing: Bool = false) throws -> Upload {
    let updated = try store.commit(
      session, committed: committed, to: end, length: length, sha256: sink.sha256, finishing: finishing)
    leaseRenewed = .now
    return updated
  }

  /// The offset committed so far: the upload's before this append, or its last checkpoint.
  public var committedOffset: Int64 { committed.offset }

  /// Makes what arrived durable and commits it as the offset, under the lease this append holds.
  private func checkpointIfDue(_ policy: UploadCheckpoints) throws {
    let end = upload.offset + received
    let pending = end - committed.offset
    guard pending > 0 else { return }
    if let expectedBodyLength, received >= expectedBodyLength { return }
    // The last byte needs the admission step: it is only ever committed by publishing.
    if let length, end == length { return }
    let now = ContinuousClock.now
    guard pending >= policy.bytes || now - lastCheckpoint >= policy.interval else { return }
    do {
      try sink.flush()
      committed = try commit(to: end)
      session.offset = end
      session.sha256 = sink.sha256?.copy()
      (session.crc32c, session.md5) = (sink.crc32c?.copy(), sink.md5?.copy())
      lastCheckpoint = now
    } catch {
      abort(keepReceived: false)
      throw error
    }
  }

  public func write(_ data: Data) throws { try data.withUnsafeBytes { try write($0) } }

  /// Makes the end of this append's bytes the upload's end, when no length is declared yet:
  /// for a body whose size was known only when it ended (GCS's `Content-Range: bytes N-*/*`).
  /// Call before ``finish()``.
  public func endUploadHere() {
    precondition(open, "endUploadHere after the append ended")
    if length == nil { length = upload.offset + received }
  }

  /// Ends the append: verifies the checksum, makes the bytes durable and commits the new offset,
  /// or, when this was the last byte of a non-partial upload, stages it for publishing.
  /// - Throws: ``UploadError/checksumMismatch(algorithm:)`` (the chunk is discarded),
  ///   ``UploadError/notFound(id:)`` if the upload vanished meanwhile, I/O errors.
  public func finish() throws -> UploadAppendOutcome {
    precondition(open, "finish after the append ended")
    do {
      try sink.flush()
    } catch {
      abort(keepReceived: false)
      throw error
    }
    if let checksum, let checksumDigest, checksumDigest.finalize() != checksum.digest {
      abort(keepReceived: false)
      throw UploadError.checksumMismatch(algorithm: checksum.algorithm.rawValue)
    }
    return try settle()
  }

  /// Ends the append without a complete body. With `keepReceived`, bytes that arrived are made
  /// durable and committed (tus servers keep what they got), unless a checksum guards the chunk
  /// or they would complete the upload (that needs the policy's final say, so the client resends).
  public func abort(keepReceived: Bool) {
    guard open else { return }
    let completes = length.map { upload.offset + received == $0 } ?? false
    if keepReceived, upload.offset + received > committed.offset, checksum == nil, !completes || upload.isPartial {
      _ = try? settle()  // cleans up after itself when it fails
      return
    }
    open = false
    store.release(upload.id, keeping: session.truncateToCommitted() ? session : nil)
  }

  private func settle() throws -> UploadAppendOutcome {
    open = false
    let newOffset = upload.offset + received
    do {
      try sink.flush()
      if let length, newOffset == length, !upload.isPartial {
        let staged = try store.stage(session, upload: upload, length: length, sha256: sink.sha256)
        guard staged.size == length else { throw UploadError.dataLost(id: upload.id) }
        // The session's checksums cover every byte when it was hot from the first one.
        staged.remember(md5: sink.md5?.copy().finalize(), crc32c: sink.crc32c?.value)
        let done = Upload(
          id: upload.id, bucket: upload.bucket, name: upload.name, owner: upload.owner, length: length,
          offset: length, metadata: upload.metadata, concat: upload.concat, expiresAt: committed.expiresAt,
          createdAt: upload.createdAt, completedAt: store.now())
        return .complete(CompletedUpload(upload: done, staged: staged, store: store, session: session))
      }
      let updated = try commit(to: newOffset, finishing: upload.isPartial && newOffset == length)
      session.offset = newOffset
      session.sha256 = sink.sha256
      (session.crc32c, session.md5) = (sink.crc32c, sink.md5)
      // A finished partial takes no more bytes: close its file. (Shared mode: a staging file
      // that cannot be compacted is dropped; the next append rebuilds it from the pieces.)
      let keep = !updated.isComplete && (try? session.compact()) != nil
      store.release(upload.id, keeping: keep ? session : nil)
      return .progress(updated)
    } catch {
      _ = session.truncateToCommitted()
      store.release(upload.id, keeping: nil)
      throw error
    }
  }
}

@available(*, unavailable)
extension UploadAppend: Sendable {}

/// What an append ended with.
public enum UploadAppendOutcome {
  /// The new offset is committed.
  case progress(Upload)
  /// The last byte arrived: publish or reject it.
  case complete(CompletedUpload)
}

/// How often a long append commits what it has received (see ``UploadAppend``): every `bytes`
/// or every `interval`, whichever comes first. Each checkpoint costs an fsync and a catalog
/// write; 8 MiB or 2 s keeps that under one per 8 MiB on fast links and bounds what a slow one
/// can lose to two seconds of sending.
public struct UploadCheckpoints: Sendable, Equatable {
  public var bytes: Int64
  public var interval: Duration

  public init(bytes: Int64, interval: Duration) {
    self.bytes = bytes
    self.interval = interval
  }

  public static let `default` = UploadCheckpoints(bytes: 8 << 20, interval: .seconds(2))
}
