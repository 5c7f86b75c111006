import Foundation
import LarderCrypto
import LarderLogging

/// The upload data store of uploads that any node can continue (shared mode: blobs in S3, the
/// catalog on PostgreSQL; ``UploadDataStore``). ARCHITECTURE.md, "Resumable uploads across nodes".
///
/// - The bytes: each commit (the end of a PATCH or chunk, or a checkpoint) stores what arrived
///   since the last one before it commits the offset. Once the node's staging file holds 5 MiB
///   past the parts, it goes as the next part of the upload's S3 multipart upload; below that,
///   the new bytes go as a *piece*, a small object named for its range and the lease that wrote
///   it. The row records the parts (with their ETags), the pieces and the SHA-256 state, in the
///   same transaction as the offset: an acknowledged byte is in S3 before its offset commits.
/// - The lock: the in-process lease of ``UploadStore`` plus a catalog lease (`lease_holder`,
///   `lease_until`, ``CatalogUploadLocker``) taken with the append and renewed while it runs, so a node that dies
///   holding it blocks the upload for at most ``UploadStore/lease``. Every commit checks that
///   the lease is still this append's: a node that stalled past its lease cannot commit over
///   the node that took over.
/// - The end: the last part is sent, the multipart upload completed into `uploads/<id>/data`
///   (the row says `assembled` first, so a publish that fails can reopen it), and publishing
///   copies it to `sha256/…` server-side. Content that never reached 5 MiB was never a part: it
///   is in the staging file and goes up with an ordinary PUT.
struct SharedUploadData: UploadDataStore {
  let storage: any SharedUploadStorage
  let staging: UploadStaging
  /// The lock its appends hold: its lease's token names pieces, its epoch numbers parts, and
  /// long store calls renew it.
  let locker: any UploadLocker
  let logger: Logger
  /// Deletions of keys no row names any more, one at a time off the requests' path.
  let cleanup = DispatchQueue(label: "larder.uploads.cleanup")

  func create(_ id: String) throws { try staging.create(id) }

  /// The row's state; a row without one is an upload that has stored nothing yet.
  private func state(of upload: Upload) throws -> SharedUploadState {
    guard upload.dataState.stored != nil else {
      // Bytes stored before the store was shared are on one node's disk: not continuable here.
      guard upload.offset == 0 else { throw UploadError.dataLost(id: upload.id) }
      return SharedUploadState()
    }
    guard let state = SharedUploadState(json: upload.dataState.stored) else { throw UploadError.dataLost(id: upload.id) }
    return state
  }

  /// The cached session when nothing moved since it was this node's, else one rebuilt from the
  /// pieces. An assembled upload (its publish failed) is reopened first, and its new state
  /// recorded before any byte is written.
  func open(_ upload: Upload, cached: UploadSession?) throws -> (session: UploadSession, record: UploadDataState?) {
    var state = try state(of: upload)
    var record: UploadDataState?
    if state.assembled, !upload.isPartial {
      state = try reopen(upload.id, state: state)
      record = UploadDataState(stored: state.json)
    }
    if let cached, cached.offset == upload.offset, cached.shared == state { return (cached, record) }
    let session = try UploadSession.loadShared(
      id: upload.id, path: staging.path(of: upload.id), offset: upload.offset, state: state, storage: storage)
    return (session, record)
  }

  /// Stored as a part or a piece (the file is then a cache); the state names them.
  func commit(_ session: UploadSession, id: String, to end: Int64, sha256: Digest?, finishing: Bool) throws
    -> UploadDataState
  {
    UploadDataState(stored: try ship(session, id: id, to: end, sha256: sha256!, finishing: finishing).json)
  }

  func state(of session: UploadSession) -> UploadDataState { UploadDataState(stored: session.shared?.json) }

  /// Checked as they are read (``readPartial(_:_:)``): their bytes are in the shared store.
  func checkPartial(_ part: Upload) throws {}

  func readPartial(_ part: Upload, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    var copied: Int64 = 0
    try readShared(part) { chunk in
      try body(chunk)
      copied += Int64(chunk.count)
    }
    guard copied == part.offset else { throw UploadError.dataLost(id: part.id) }
  }

  /// An upload assembled for a publish that then failed (the client resends its last chunk):
  /// a new multipart upload, under a new data name (some stores refuse a copy onto its own
  /// key), whose first parts copy what the old parts held from the assembled object
  /// (``SharedUploadStorage/copyPart``: server-side where libcurl can sign it, else through this
  /// node one part at a time). A rare path: a publish that failed after the assembly.
  private func reopen(_ id: String, state: SharedUploadState) throws -> SharedUploadState
  {
    var fresh = state
    fresh.assembled = false
    guard try storage.assembledSize(upload: id, data: state.data) != nil else {
      // The publish failed before the assembly: the multipart upload is as the row says.
      return fresh
    }
    fresh.parts = []
    fresh.multipart = nil
    fresh.data = "data-\(SecureRandom.hexIdentifier(byteCount: 4))"
    let base = state.base
    if base > 0 {
      let epoch = locker.heldLease(id)?.epoch ?? 0
      try locker.whileRenewing(id) {
        let multipart = try storage.startParts(upload: id, data: fresh.data)
        // Equal shares of at most 16 MiB (one is in memory when copied through this node): all
        // but the last well over S3's 5 MiB minimum.
        let count = (base + Self.reopenPartSize - 1) / Self.reopenPartSize
        let share = (base + count - 1) / count
        var at: Int64 = 0
        while at < base {
          let end = min(base, at + share)
          var part = try storage.copyPart(
            upload: id, data: fresh.data, multipart: multipart, number: fresh.nextPartNumber(epoch: epoch),
            from: state.data, range: at..<end)
          part.epoch = epoch
          fresh.parts.append(part)
          at = end
        }
        fresh.multipart = multipart
      }
    }
    return fresh
  }

  static let reopenPartSize: Int64 = 16 << 20

  // MARK: - storing what arrived

  /// Stores the bytes [`session.offset`, `end`) that the staging file holds, as a part once the
  /// file holds 5 MiB past the parts, else as a piece; `finishing` (a partial upload's last
  /// byte) sends the rest as the last part and assembles them when there are parts. Returns the
  /// state to commit with `end`; nothing is committed here.
  private func ship(
    _ session: UploadSession, id: String, to end: Int64, sha256: Digest, finishing: Bool
  ) throws -> SharedUploadState {
    var state = session.shared ?? SharedUploadState()
    let base = state.base
    let stored = base + state.piecesSize
    // The pieces hold the committed bytes; anything else is a state this node must not build on.
    guard stored == session.offset else { throw UploadError.dataLost(id: id) }
    try locker.whileRenewing(id) {
      if end > stored {
        if end - base >= storage.minimumPartSize || (finishing && !state.parts.isEmpty) {
          if state.multipart == nil { state.multipart = try storage.startParts(upload: id, data: state.data) }
          try sendPart(&state, id: id, session: session, length: end - base)
          state.pieces = []
        } else {
          // Named for the lease that wrote it: a stalled holder's late piece is a key no row names.
          let name = "piece-\(stored)-\(end)-\(locker.heldLease(id)?.token ?? "none")"
          try storage.putPiece(
            upload: id, name: name, file: session.path, offset: stored - session.origin, length: end - stored)
          state.pieces.append(.init(name: name, size: end - stored))
        }
      }
      if finishing, !state.parts.isEmpty, !state.assembled {
        try assemble(state, id: id)
        state.assembled = true
      }
    }
    state.sha256 = Data(sha256.savedState()).base64EncodedString()
    return state
  }

  /// Sends the staging file's bytes past the parts as the next part, numbered past this
  /// lease's epoch so that no other holder's part ever has its number.
  private func sendPart(
    _ state: inout SharedUploadState, id: String, session: UploadSession, length: Int64
  ) throws {
    let epoch = locker.heldLease(id)?.epoch ?? 0
    var part = try storage.sendPart(
      upload: id, data: state.data, multipart: state.multipart!, number: state.nextPartNumber(epoch: epoch),
      file: session.path, offset: state.base - session.origin, length: length)
    part.epoch = epoch
    state.parts.append(part)
  }

  /// Completes the multipart upload and checks that what the store assembled is what this
  /// node's parts sent (``SharedUploadState/assemblyMatches(etag:)``). A mismatch (or the store
  /// saying a listed part is not what it holds) is never published: its bytes are removed (its
  /// acknowledged bytes are not in the store), the store deletes its row, and the client is
  /// told so.
  /// - Throws: ``UploadError/assemblyMismatch(id:)``, the store's errors.
  private func assemble(_ state: SharedUploadState, id: String) throws {
    let matches: Bool
    do {
      matches = state.assemblyMatches(
        etag: try storage.assemble(
          upload: id, data: state.data, multipart: state.multipart!, parts: state.parts))
    } catch UploadError.assemblyMismatch {
      matches = false
    }
    guard matches else {
      _ = try? purge(id, state: UploadDataState(stored: state.json), background: true)
      throw UploadError.assemblyMismatch(id: id)
    }
  }

  /// After `state` committed: the session takes it, and pieces a new part made redundant go.
  func committed(_ state: UploadDataState, in session: UploadSession, id: String) {
    guard let state = SharedUploadState(json: state.stored) else { return }
    let old = session.shared?.pieces ?? []
    session.shared = state
    let dropped = old.filter { piece in !state.pieces.contains(piece) }
    guard !dropped.isEmpty else { return }
    // Off the answer's path: no row names them any more (measured: four DELETEs of 34 ms each
    // before every fifth 1 MiB PATCH's 204).
    cleanup.async { [storage, logger] in
      for piece in dropped {
        logger.bestEffort("remove piece \(piece.name) of upload \(id) (gc removes leftovers)") {
          try storage.removePiece(upload: id, name: piece.name)
        }
      }
    }
  }

  /// Once there are parts, the row records that they are being assembled before they are: if
  /// the publish fails, the next append finds the multipart upload used up and reopens from
  /// the data object (`reopen`), instead of sending parts to nowhere.
  func assembling(_ session: UploadSession) -> UploadDataState? {
    guard var assembling = session.shared, !assembling.parts.isEmpty else { return nil }
    assembling.assembled = true
    return UploadDataState(stored: assembling.json)
  }

  /// The last byte of a non-partial upload arrived: its content, staged for publishing.
  /// Content that never made a part is the staging file; otherwise (the row says
  /// ``assembling(_:)`` already) the last part is sent and the parts are assembled.
  func stage(_ session: UploadSession, upload: Upload, length: Int64, sha256: Digest?) throws -> StagedBlob {
    let state = session.shared ?? SharedUploadState()
    let digest = sha256!.copy().finalize()
    if state.parts.isEmpty {
      // Never a part: the staging file holds the whole content (its origin is 0).
      return try StagedBlob.adopting(path: session.path, sha256: digest, removeOnDiscard: false)
    }
    var assembling = state
    assembling.assembled = true
    session.shared = assembling
    var parts = state
    let id = upload.id
    let data = state.data
    var head: [UInt8] = []
    try locker.whileRenewing(id) {
      parts.multipart = try parts.multipart ?? storage.startParts(upload: id, data: state.data)
      if length > state.base {
        try sendPart(&parts, id: id, session: session, length: length - state.base)
      }
      try assemble(parts, id: id)
      try storage.readData(upload: id, data: data, range: 0..<min(Int64(ContentSniffer.headLength), length)) {
        head.append(contentsOf: $0)
      }
    }
    return StagedBlob(
      assembledUpload: "\(id)/\(data)", sha256: digest, size: length,
      contentType: ContentSniffer.shared.mimeType(of: head),
      read: { body in try storage.readData(upload: id, data: data, range: nil, body) })
  }

  /// Streams a finished partial upload's content from the shared store (a concatenation).
  private func readShared(_ part: Upload, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    let state = try state(of: part)
    do {
      if state.assembled {
        try storage.readData(upload: part.id, data: state.data, range: nil, body)
      } else {
        guard state.parts.isEmpty, state.piecesSize == part.offset else {
          throw UploadError.dataLost(id: part.id)
        }
        for piece in state.pieces { try storage.readPiece(upload: part.id, name: piece.name, body) }
      }
    } catch LarderError.io(_, _, ENOENT) {
      throw UploadError.dataLost(id: part.id)
    }
  }

  /// The staging file now; what the shared store holds in the background (deleting a 256 MiB
  /// data object took Swift 2.6 s), best effort (gc removes leftovers of uploads without a
  /// row), or now for the collector. Only an upload id names keys.
  func purge(_ id: String, state: UploadDataState, background: Bool) throws -> Int64 {
    let freed = staging.remove(id)
    guard UploadStore.isUploadID(id) else { return freed }
    let state = SharedUploadState(json: state.stored)
    guard background else {
      try storage.removeUpload(id, state: state)
      return freed
    }
    cleanup.async { [storage, logger] in
      logger.bestEffort("remove the stored bytes of upload \(id) (gc removes leftovers)") {
        try storage.removeUpload(id, state: state)
      }
    }
    return freed
  }

  func stagedBytes(_ id: String) -> Int64 { staging.size(of: id) }

  /// Staging files no session of this process uses and no other process holds (each live one
  /// is `flock`ed by its session): caches, since the bucket holds the bytes and the next append
  /// here rebuilds its file from the pieces. Without this, every node would keep a file for
  /// each upload that another node finished.
  func sweepStagingFiles(_ exclusive: (_ id: String, _ body: () -> Void) -> Void) {
    for name in POSIX.listDirectory(staging.directory) where UploadStore.isUploadID(name) {
      let file = staging.path(of: name)
      exclusive(name) {
        let fd = Foundation.open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return }
        defer { close(fd) }
        if POSIX.tryLock(fd) { unlink(file) }
      }
    }
  }

  /// The staging files and the bucket's uploads.
  func forEachStored(_ body: (_ id: String, _ newest: Date, _ bytes: Int64) throws -> Void) throws {
    try staging.forEach(body)
    try storage.forEachStoredUpload { id, newest in try body(id, newest, 0) }
  }

  func waitForCleanup() { cleanup.sync {} }
}
