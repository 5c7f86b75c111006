import Foundation
import LarderCrypto

/// Resumable uploads that any node can continue (shared mode: blobs in S3, the catalog on
/// PostgreSQL). ARCHITECTURE §11, "Resumable uploads across nodes".
///
/// - The bytes: each commit (the end of a PATCH or chunk, or a checkpoint) stores what arrived
///   since the last one before it commits the offset. Once the node's staging file holds 5 MiB
///   past the parts, it goes as the next part of the upload's S3 multipart upload; below that,
///   the new bytes go as a *piece*, a small object named for its range and the lease that wrote
///   it. The row records the parts (with their ETags), the pieces and the SHA-256 state, in the
///   same transaction as the offset: an acknowledged byte is in S3 before its offset commits.
/// - The lock: the in-process lease of ``UploadStore`` plus a catalog lease (`lease_holder`,
///   `lease_until`) taken with the append and renewed while it runs, so a node that dies
///   holding it blocks the upload for at most ``UploadStore/lease``. Every commit checks that
///   the lease is still this append's: a node that stalled past its lease cannot commit over
///   the node that took over.
/// - The end: the last part is sent, the multipart upload completed into `uploads/<id>/data`
///   (the row says `assembled` first, so a publish that fails can reopen it), and publishing
///   copies it to `sha256/…` server-side. Content that never reached 5 MiB was never a part: it
///   is in the staging file and goes up with an ordinary PUT.
extension UploadStore {
  // MARK: - the catalog lease

  /// Takes the upload's catalog lease for this process's append.
  /// - Throws: ``UploadError/locked(id:)`` while another node's lease runs,
  ///   ``UploadError/notFound(id:)`` when there is no such upload.
  func claimLease(_ id: String) throws {
    let token = SecureRandom.hexIdentifier(byteCount: 8)
    let now = Date()
    let until = now + lease.timeInterval
    let claimed: Bool = try larder.catalog.write { db in
      try db.execute(
        """
        UPDATE uploads SET lease_holder = ?, lease_until = ?
        WHERE id = ? AND (lease_until IS NULL OR lease_until < ?)
        """, [token, until, id, now])
      if db.changes == 1 { return true }
      guard try db.row("SELECT 1 FROM uploads WHERE id = ?", [id]) != nil else { throw UploadError.notFound(id: id) }
      return false
    }
    guard claimed else { throw UploadError.locked(id: id) }
    heldLeases.withLock { $0[id] = token }
  }

  /// Extends this process's lease on `id`.
  /// - Throws: ``UploadError/locked(id:)`` when it was lost (it ran out and another node took it).
  func renewLease(_ id: String) throws {
    guard let token = heldLeases.withLock({ $0[id] }) else { throw UploadError.locked(id: id) }
    try larder.catalog.write { db in
      try db.execute(
        "UPDATE uploads SET lease_until = ? WHERE id = ? AND lease_holder = ?",
        [Date() + lease.timeInterval, id, token])
      guard db.changes == 1 else { throw UploadError.locked(id: id) }
    }
  }

  /// Gives the catalog lease back, if this process holds it (best effort: it runs out anyway).
  func releaseLease(_ id: String) {
    guard let token = heldLeases.withLock({ $0.removeValue(forKey: id) }) else { return }
    _ = try? larder.catalog.write { db in
      try db.execute(
        "UPDATE uploads SET lease_holder = NULL, lease_until = NULL WHERE id = ? AND lease_holder = ?", [id, token])
    }
  }

  func leaseToken(_ id: String) -> String? { heldLeases.withLock { $0[id] } }

  // MARK: - state

  /// The row's shared state; a row without one is an upload that has stored nothing yet.
  func sharedState(of id: String) throws -> SharedUploadState {
    let row = try larder.catalog.read(snapshot: false) { db in
      try db.row("SELECT \"offset\", shared_state FROM uploads WHERE id = ?", [id])
    }
    guard let row else { throw UploadError.notFound(id: id) }
    if let json = row.string("shared_state") {
      guard let state = SharedUploadState(json: json) else { throw UploadError.dataLost(id: id) }
      return state
    }
    // Bytes stored before the store was shared are on one node's disk: not continuable here.
    guard row.int("offset") ?? 0 == 0 else { throw UploadError.dataLost(id: id) }
    return SharedUploadState()
  }

  /// Records `state` alone (the offset unchanged), under this append's lease.
  func recordSharedState(_ id: String, _ state: SharedUploadState) throws {
    let token = leaseToken(id)
    try larder.catalog.write { db in
      try db.execute(
        "UPDATE uploads SET shared_state = ? WHERE id = ? AND lease_holder = ?", [state.json, id, token])
      guard db.changes == 1 else { throw UploadError.locked(id: id) }
    }
  }

  /// The session for an append in shared mode: the cached one when nothing moved since it was
  /// this node's, else one rebuilt from the pieces. An assembled upload (its publish failed) is
  /// reopened first.
  func sharedSession(
    _ upload: Upload, cached: UploadSession?, storage: any SharedUploadStorage
  ) throws -> UploadSession {
    var state = try sharedState(of: upload.id)
    if state.assembled, !upload.isPartial {
      state = try reopen(upload.id, state: state, storage: storage)
    }
    if let cached, cached.offset == upload.offset, cached.shared == state { return cached }
    return try UploadSession.loadShared(
      id: upload.id, path: path(of: upload.id), offset: upload.offset, state: state, storage: storage)
  }

  /// An upload assembled for a publish that then failed (the client resends its last chunk):
  /// a new multipart upload, under a new data name (some stores refuse a copy onto its own
  /// key), whose first parts copy what the old parts held from the assembled object
  /// (``SharedUploadStorage/copyPart``: server-side where libcurl can sign it, else through this
  /// node one part at a time). A rare path: a publish that failed after the assembly.
  private func reopen(_ id: String, state: SharedUploadState, storage: any SharedUploadStorage) throws
    -> SharedUploadState
  {
    var fresh = state
    fresh.assembled = false
    guard try storage.assembledSize(upload: id, data: state.data) != nil else {
      // The publish failed before the assembly: the multipart upload is as the row says.
      try recordSharedState(id, fresh)
      return fresh
    }
    fresh.parts = []
    fresh.multipart = nil
    fresh.data = "data-\(SecureRandom.hexIdentifier(byteCount: 4))"
    let base = state.base
    if base > 0 {
      let multipart = try storage.startParts(upload: id, data: fresh.data)
      // Equal shares of at most 16 MiB (one is in memory when copied through this node): all but
      // the last well over S3's 5 MiB minimum.
      let count = (base + Self.reopenPartSize - 1) / Self.reopenPartSize
      let share = (base + count - 1) / count
      var at: Int64 = 0
      while at < base {
        let end = min(base, at + share)
        fresh.parts.append(
          try storage.copyPart(
            upload: id, data: fresh.data, multipart: multipart, number: fresh.parts.count + 1, from: state.data,
            range: at..<end))
        at = end
      }
      fresh.multipart = multipart
    }
    try recordSharedState(id, fresh)
    return fresh
  }

  static let reopenPartSize: Int64 = 16 << 20

  // MARK: - storing what arrived

  /// Stores the bytes [`session.offset`, `end`) that the staging file holds, as a part once the
  /// file holds 5 MiB past the parts, else as a piece; `finishing` (a partial upload's last
  /// byte) sends the rest as the last part and assembles them when there are parts. Returns the
  /// state to commit with `end`; nothing is committed here.
  func ship(
    _ session: UploadSession, id: String, to end: Int64, sha256: Digest, finishing: Bool,
    storage: any SharedUploadStorage
  ) throws -> SharedUploadState {
    var state = session.shared ?? SharedUploadState()
    let base = state.base
    let stored = base + state.piecesSize
    // The pieces hold the committed bytes; anything else is a state this node must not build on.
    guard stored == session.offset else { throw UploadError.dataLost(id: id) }
    if end > stored {
      if end - base >= storage.minimumPartSize || (finishing && !state.parts.isEmpty) {
        if state.multipart == nil { state.multipart = try storage.startParts(upload: id, data: state.data) }
        state.parts.append(
          try storage.sendPart(
            upload: id, data: state.data, multipart: state.multipart!, number: state.parts.count + 1, file: session.path,
            offset: base - session.origin, length: end - base))
        state.pieces = []
      } else {
        let name = "piece-\(stored)-\(end)-\(leaseToken(id) ?? "none")"
        try storage.putPiece(
          upload: id, name: name, file: session.path, offset: stored - session.origin, length: end - stored)
        state.pieces.append(.init(name: name, size: end - stored))
      }
    }
    if finishing, !state.parts.isEmpty, !state.assembled {
      try storage.assemble(upload: id, data: state.data, multipart: state.multipart!, parts: state.parts)
      state.assembled = true
    }
    state.sha256 = Data(sha256.savedState()).base64EncodedString()
    return state
  }

  /// After `state` committed: the session takes it, and pieces a new part made redundant go.
  func adopt(_ state: SharedUploadState, in session: UploadSession, id: String, storage: any SharedUploadStorage) {
    let old = session.shared?.pieces ?? []
    session.shared = state
    let dropped = old.filter { piece in !state.pieces.contains(piece) }
    guard !dropped.isEmpty else { return }
    // Off the answer's path: no row names them any more (measured: four DELETEs of 34 ms each
    // before every fifth 1 MiB PATCH's 204).
    cleanup.async { for piece in dropped { try? storage.removePiece(upload: id, name: piece.name) } }
  }

  /// The last byte of a non-partial upload arrived: its content, staged for publishing.
  /// Content that never made a part is the staging file; otherwise the last part is sent, the
  /// row records that the parts are being assembled, and they are.
  func stageShared(
    _ session: UploadSession, upload: Upload, length: Int64, sha256: Digest, storage: any SharedUploadStorage
  ) throws -> StagedBlob {
    let state = session.shared ?? SharedUploadState()
    let digest = sha256.copy().finalize()
    if state.parts.isEmpty {
      // Never a part: the staging file holds the whole content (its origin is 0).
      return try StagedBlob.adopting(path: session.path, sha256: digest, removeOnDiscard: false)
    }
    var assembling = state
    assembling.assembled = true
    // Recorded first: if the publish fails, the next append finds the multipart upload used up
    // and reopens from the data object (`reopen`), instead of sending parts to nowhere.
    try recordSharedState(upload.id, assembling)
    session.shared = assembling
    var parts = state
    parts.multipart = try parts.multipart ?? storage.startParts(upload: upload.id, data: state.data)
    if length > state.base {
      parts.parts.append(
        try storage.sendPart(
          upload: upload.id, data: state.data, multipart: parts.multipart!, number: parts.parts.count + 1, file: session.path,
          offset: state.base - session.origin, length: length - state.base))
    }
    try storage.assemble(upload: upload.id, data: state.data, multipart: parts.multipart!, parts: parts.parts)
    var head: [UInt8] = []
    let id = upload.id
    let data = state.data
    try storage.readData(upload: id, data: data, range: 0..<min(Int64(ContentSniffer.headLength), length)) {
      head.append(contentsOf: $0)
    }
    return StagedBlob(
      assembledUpload: "\(id)/\(data)", sha256: digest, size: length, contentType: ContentSniffer.shared.mimeType(of: head),
      read: { body in try storage.readData(upload: id, data: data, range: nil, body) })
  }

  /// Streams a finished partial upload's content from the shared store (a concatenation).
  func readShared(_ part: Upload, storage: any SharedUploadStorage, _ body: (UnsafeRawBufferPointer) throws -> Void)
    throws
  {
    let state = try sharedState(of: part.id)
    do {
      if state.assembled {
        try storage.readData(upload: part.id, data: state.data, range: nil, body)
      } else {
        guard state.parts.isEmpty, state.piecesSize == part.offset else { throw UploadError.dataLost(id: part.id) }
        for piece in state.pieces { try storage.readPiece(upload: part.id, name: piece.name, body) }
      }
    } catch LarderError.io(_, _, ENOENT) {
      throw UploadError.dataLost(id: part.id)
    }
  }

  /// Removes what the shared store holds for an upload whose row is gone or completed: in the
  /// background (deleting a 256 MiB data object took Swift 2.6 s), best effort (gc removes
  /// leftovers of uploads without a row).
  func removeShared(_ id: String, state: SharedUploadState?) {
    guard let storage = shared else { return }
    cleanup.async { try? storage.removeUpload(id, state: state) }
  }

  /// Waits for the background removals queued so far (tests, and a service stopping: a
  /// multipart upload's abort dropped at exit is one gc can no longer name).
  public func waitForCleanup() { cleanup.sync {} }
}
