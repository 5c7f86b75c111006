import Foundation
import LarderCrypto

/// The catalog side of shared mode (``SharedUploadData``, ``CatalogUploadLocker``): the row's
/// shared state, recorded under this append's lease.
extension UploadStore {
  /// The SQL condition, and its arguments, that this append still holds the lease on `id`
  /// (``UploadLocker/holding(_:)``): every commit of a shared upload adds it.
  func holdsLease(_ id: String) -> (sql: String, arguments: [any SQLBindable]) {
    locker.holding(id) ?? ("1 = 0", [])
  }

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
    let held = holdsLease(id)
    try larder.catalog.write { db in
      try db.execute(
        "UPDATE uploads SET shared_state = ? WHERE id = ? AND \(held.sql)", [state.json, id] + held.arguments)
      guard db.changes == 1 else { throw UploadError.locked(id: id) }
    }
  }

  /// Waits for the background removals queued so far (tests, and a service stopping: a
  /// multipart upload's abort dropped at exit is one gc can no longer name).
  public func waitForCleanup() { cleanup.sync {} }
}
