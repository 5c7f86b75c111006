import Larder

extension FaultInjector {
  /// Fails the write transaction's COMMIT itself, for real, while `shouldFail()` is true:
  /// `body` throws at ``FaultPoint/commit`` and the breaker then plants a foreign-key violation
  /// that SQLite defers to the COMMIT (PostgreSQL's RESTRICT keys cannot be deferred: there
  /// the UPDATE itself fails).
  package static func failingCommit(while shouldFail: @escaping @Sendable () -> Bool) -> FaultInjector {
    struct CommitFault: Error {}
    return FaultInjector(
      { point in if point == .commit, shouldFail() { throw CommitFault() } },
      breakingCommit: { db, fileID in
        if db.dialect == .sqlite { try db.execute("PRAGMA defer_foreign_keys = ON") }
        try db.execute("UPDATE files SET blob_sha256 = ? WHERE id = ?", [[UInt8](repeating: 0, count: 32), fileID])
      })
  }
}
