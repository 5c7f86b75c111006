import Foundation

/// A backup's view of the SQLite catalog (``CatalogEngine/writeSnapshot(_:to:)``): SQLite's
/// online backup of the file as of one read transaction (a page copy: `VACUUM INTO` rebuilt every
/// table and index, most of an incremental backup's time on a large catalog).
/// PostgreSQL's is in `LarderPostgres` (one REPEATABLE READ read-only transaction copied table
/// by table, ``CatalogSnapshotFile``).
///
/// The snapshot file is always an SQLite catalog of Larder's schema, in rollback-journal mode:
/// one portable, self-describing file whatever the catalog was (docs/backup.md), which
/// `sqlite3` opens, the verifier reads, and a restore puts in place or copies into PostgreSQL.
extension SQLiteCatalogEngine {
  /// SQLite's one writer already orders the pin after every collector's transaction.
  func holdOffCollectors(_ writer: any Database) {}

  /// On a connection of its own (`db` may be a wrapped one), after the pin committed.
  func writeSnapshot(_ db: any Database, to path: String) throws {
    try SQLiteDatabase(path: self.path, readOnly: true).copy(to: path)
  }
}

/// A snapshot file made from another engine's catalog: a fresh SQLite catalog of the same
/// schema version, filled with every row `source` sees, table by table.
package enum CatalogSnapshotFile {
  /// Copies every table of Larder's schema from `source` (inside the caller's snapshot
  /// transaction) into a new SQLite catalog at `path`.
  /// - Parameters:
  ///   - version: the source's schema version: it must be this Larder's (a snapshot of an older
  ///     or newer catalog is refused: open the store once with this version first).
  ///   - issuedFences: the highest fence the source ever handed out (PostgreSQL's counter is a
  ///     sequence, not a row): the file's counter starts there, so a restore never reissues one.
  /// - Throws: ``LarderError/invalidArgument(_:)`` for a version mismatch, ``DatabaseError``.
  package static func write(from source: Database, version: Int, issuedFences: Int64, to path: String) throws {
    guard version == Migrations.all.count else {
      throw LarderError.invalidArgument(
        "the catalog's schema is version \(version), this Larder's is \(Migrations.all.count): "
          + "open the store once with this version (or back it up with its own) first")
    }
    let file = try SQLiteDatabase(path: path)
    try Migrations.run(on: file)
    try file.transaction(immediate: true) { target in
      // Checked at the commit, when every table is in: the copy's order need not be the keys'.
      try target.execute("PRAGMA defer_foreign_keys = ON")
      let tables = try target.rows(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
      ).compactMap { $0.string("name") }
      // Seeded rows (the page-token key, the fence rows) are the source's.
      for table in tables.reversed() { try target.execute("DELETE FROM \(table)") }
      for table in tables {
        var insert: String?
        try source.forEachRow("SELECT * FROM \(table)") { row in
          if insert == nil {
            let columns = row.columns.map { "\"\($0)\"" }.joined(separator: ", ")
            let marks = Array(repeating: "?", count: row.columns.count).joined(separator: ", ")
            insert = "INSERT INTO \(table)(\(columns)) VALUES (\(marks))"
          }
          try target.execute(insert!, row.values)
        }
      }
      let top = try [
        "SELECT max(fence) AS f FROM blobs", "SELECT max(fence) AS f FROM blob_deletions",
        "SELECT fence AS f FROM blob_fences WHERE name = 'counter'",
      ].map { try target.row($0)?.int("f") ?? 0 }.max() ?? 0
      try target.execute(
        "UPDATE blob_fences SET fence = ? WHERE name = 'counter'", [max(top, issuedFences)])
    }
    try file.execute("PRAGMA journal_mode=DELETE")
  }
}
