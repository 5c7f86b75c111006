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
    return try table.inProgress(among: ids, now: now())
  }
}
