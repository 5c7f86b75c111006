import Dispatch
import Foundation
import LarderCrypto
import Synchronization

/// Computes the MD5 of blobs committed without one, after the commit, on one low-priority queue.
///
/// MD5 exists for Firebase's `md5Hash` and for clients' `Content-MD5`; hashing it inline cost
/// about half of an upload's CPU (a tus profile: MD5 46 %, SHA-256 20 %). So uploads verify a
/// client's MD5 inline only when one is given, small content (≤ ``FileStore/inlineMD5Limit``)
/// is hashed at commit, and everything else is committed with `blobs.md5` NULL and hashed here.
///
/// The work list is the table itself (`blobs.md5 IS NULL`, a partial index), so the work
/// survives restarts and needs no queue of its own on disk; several processes may hash the same
/// blob at once and the first `UPDATE … WHERE md5 IS NULL` wins (the others change nothing).
/// A blob that `gc` removes while it is being hashed is no problem: the open file still reads,
/// and the update finds no row, so nothing is resurrected. A missing or unreadable file is
/// skipped for this pass (`verify` reports it).
///
/// The CRC32C (GCS's `crc32c`, migration 10) is computed in the same read and recorded with it;
/// blobs whose MD5 was known but not their CRC32C (a client's `Content-MD5`, blobs older than
/// migration 10) are a second work list (`blobs.crc32c IS NULL`), scanned after the first.
public final class MD5Backfill: Sendable {
  private let catalog: Catalog
  /// Where the bytes are read from (``ContentStore/read(_:range:_:)``).
  private let content: any ContentStore
  private let queue = DispatchQueue(label: "larder.md5-backfill", qos: .background)
  /// Between passes, a rescan after this long picks up blobs that other processes committed
  /// (a CLI `put` that exited before hashing); nil: only ``wake()`` starts a pass.
  private let rescanInterval: Duration?
  /// `running`: a pass is scheduled or under way; `again`: woken during it, so scan once more;
  /// `rescanArmed`: one delayed rescan is pending (never more than one).
  private let state = Mutex<(running: Bool, again: Bool, rescanArmed: Bool)>((false, false, false))
  /// Set by ``stop()``: no pass starts, and a running one ends after the blob it is on.
  private let stopped = Atomic<Bool>(false)

  init(catalog: Catalog, content: any ContentStore, rescanInterval: Duration? = nil) {
    self.catalog = catalog
    self.content = content
    self.rescanInterval = rescanInterval
  }

  /// Starts a pass over the blobs without an MD5, unless one is under way (it is then rerun once
  /// it ends, so a blob committed meanwhile is not missed). Returns at once.
  public func wake() {
    guard !stopped.load(ordering: .relaxed) else { return }
    let start = state.withLock { s -> Bool in
      if s.running {
        s.again = true
        return false
      }
      s.running = true
      return true
    }
    guard start else { return }
    queue.async { [self] in
      while true {
        runPass()
        let more = state.withLock { s -> Bool in
          if s.again {
            s.again = false
            return true
          }
          s.running = false
          return false
        }
        if !more { break }
      }
      armRescan()
    }
  }

  /// Schedules one delayed ``wake()``; it holds the backfill weakly, so a closed store's ends.
  private func armRescan() {
    guard let rescanInterval else { return }
    let arm = state.withLock { s -> Bool in
      if s.rescanArmed { return false }
      s.rescanArmed = true
      return true
    }
    guard arm else { return }
    let c = rescanInterval.components
    let nanoseconds = Int(c.seconds) * 1_000_000_000 + Int(c.attoseconds / 1_000_000_000)
    queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in
      guard let self else { return }
      state.withLock { $0.rescanArmed = false }
      wake()
    }
  }

  /// Ends the work for good and waits for the blob being hashed, if any: call it before the
  /// process exits. A pass still hashing when `exit` runs would call OpenSSL while its atexit
  /// cleanup tears it down (seen as a SIGSEGV at the end of a `larder gc` over a million blobs).
  public func stop() {
    stopped.store(true, ordering: .relaxed)
    queue.sync {}
  }

  /// Whether a pass is scheduled or running (for tests and `larder` status).
  public var isRunning: Bool { state.withLock { $0.running } }

  /// Blocks until no pass is running (tests; a shutting-down process).
  public func waitUntilIdle() {
    while isRunning { queue.sync {} }
  }

  /// One pass in `sha256` order: a failure skips that blob, so the pass always ends.
  /// - Returns: how many MD5s it stored.
  @discardableResult
  public func runPass() -> Int {
    let stored = scan(missing: "md5")
    scan(missing: "crc32c")
    return stored
  }

  /// Fills every blob whose `column` is NULL, in `sha256` order; how many it filled.
  @discardableResult
  private func scan(missing column: String) -> Int {
    var cursor = [UInt8]()
    var stored = 0
    while true {
      let batch: [[UInt8]]
      do {
        batch = try catalog.read(snapshot: false) { db in
          try db.rows(
            "SELECT sha256 FROM blobs WHERE \(column) IS NULL AND sha256 > ? ORDER BY sha256 LIMIT 64", [cursor]
          ).compactMap { $0.bytes("sha256") }
        }
      } catch {
        return stored
      }
      guard let last = batch.last else { return stored }
      for sha256 in batch {
        if stopped.load(ordering: .relaxed) { return stored }
        if (try? fill(sha256: sha256)) != nil { stored += 1 }
      }
      cursor = last
    }
  }

  /// Hashes one blob's file and records its MD5 if the row still has none.
  /// - Returns: the MD5 (also when the row was deleted meanwhile or another process was first).
  /// - Throws: an I/O error (the file is missing or unreadable), ``DatabaseError``.
  /// `beforeRecording` is a test hook, run between hashing and recording.
  @discardableResult
  func fill(sha256: [UInt8], beforeRecording: () throws -> Void = {}) throws -> [UInt8] {
    try fillDigests(sha256: sha256, beforeRecording: beforeRecording).md5
  }

  /// Hashes one blob's bytes once for its MD5 and CRC32C and records whichever the row lacks.
  func fillDigests(sha256: [UInt8], beforeRecording: () throws -> Void = {}) throws -> (md5: [UInt8], crc32c: UInt32) {
    let digest = Digest(.md5)
    var crc = CRC32C()
    // No row (or no bytes): gc took it meanwhile, nothing to record.
    try content.read(sha256, range: nil) {
      digest.update($0)
      crc.update($0)
    }
    let md5 = digest.finalize()
    try beforeRecording()
    try catalog.write(releasingReserve: false) { db in
      try db.execute(
        "UPDATE blobs SET md5 = coalesce(md5, ?), crc32c = coalesce(crc32c, ?) WHERE sha256 = ? AND (md5 IS NULL OR crc32c IS NULL)",
        [md5, Int64(crc.value), sha256])
    }
    return (md5, crc.value)
  }

  /// The MD5 of a file, read in 1 MiB chunks.
  static func md5(ofFile path: String) throws -> [UInt8] {
    let digest = Digest(.md5)
    try BlobReader(path: path).forEachChunk { digest.update($0) }
    return digest.finalize()
  }
}
