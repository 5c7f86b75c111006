import Foundation

extension UploadStore {
  /// Which of `ids` are still in progress: recorded, not completed, not expired. A terminated
  /// upload (its row deleted), a published one and an expired one are not.
  ///
  ///     let open = try uploads.inProgress(among: ["3f…", "9a…"])   // ["3f…"]
  ///
  /// Primary-key lookups only (the server's per-identity limit on uploads in progress asks this
  /// of the uploads it saw created, so that a finish on another node or a collection by
  /// `larder gc` frees their slots).
  /// - Throws: the catalog's errors.
  public func inProgress(among ids: [String]) throws -> Set<String> {
    let ids = ids.filter(Self.isUploadID)
    guard !ids.isEmpty else { return [] }
    var open: Set<String> = []
    let now = now()
    // Bounded statements: SQLite's default limit on parameters is far above this.
    for start in stride(from: 0, to: ids.count, by: 500) {
      let batch = Array(ids[start..<min(start + 500, ids.count)])
      let marks = Array(repeating: "?", count: batch.count).joined(separator: ", ")
      let rows = try larder.catalog.read(snapshot: false) { db in
        try db.rows(
          "SELECT id FROM uploads WHERE id IN (\(marks)) AND completed_at IS NULL AND expires_at >= ?",
          batch.map { $0 as any SQLBindable } + [now])
      }
      for row in rows { if let id = row.string("id") { open.insert(id) } }
    }
    return open
  }
}
