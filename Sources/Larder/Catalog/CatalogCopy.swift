import Foundation

/// Copies a store's catalog to another catalog (an SQLite data directory's to PostgreSQL),
/// table by table in one write transaction of the destination, then checks the counts.
///
/// The blobs stay where they are: point the nodes at the same data directory (or, later, the
/// same bucket) and at the new catalog. The destination must be empty; the page-token key moves
/// with the rows, so page tokens handed out before the move stay valid.
/// ```swift
/// let counts = try CatalogCopy.run(from: dataURL, to: CatalogLocation(parsing: "postgres://db/larder"), backends: [.postgres])
/// ```
package enum CatalogCopy {
  /// The tables, parents before children (foreign keys hold at every insert).
  static let tables = [
    "blobs", "files", "objects", "records", "attachments", "model_references", "model_links", "model_reference_rules", "uploads", "settings",
    "service_account_keys", "blob_deletions", "blob_fences", "derived_files", "event_subscriptions",
  ]
  /// Tables the destination's migrations fill, whose rows the source's replace.
  static let seeded: Set<String> = ["settings", "blob_fences"]

  /// Copies every row; returns the row count per table (equal on both sides, or it throws).
  /// - Throws: ``LarderError/invalidArgument(_:)`` when the destination already holds a store
  ///   or a count differs afterwards (the transaction then rolls back), ``DatabaseError``.
  package static func run(
    from directory: URL, to destination: CatalogLocation, backends: StoreBackends
  ) throws -> [(String, Int64)] {
    let sqlitePath = directory.standardizedFileURL.appendingPathComponent("larder.sqlite").path
    guard FileManager.default.fileExists(atPath: sqlitePath) else {
      throw LarderError.invalidArgument("no catalog at \(sqlitePath)")
    }
    return try run(fromCatalogAt: sqlitePath, to: destination, backends: backends)
  }

  /// Same, from the SQLite catalog file at `sqlitePath` (a backup snapshot's, say).
  package static func run(
    fromCatalogAt sqlitePath: String, to destination: CatalogLocation, backends: StoreBackends
  ) throws -> [(String, Int64)] {
    let source = try Catalog(path: sqlitePath)
    let target = try Catalog(location: destination, sqlitePath: sqlitePath + ".copy-target", backends: backends)
    return try source.read { from in
      try target.write { to in
        for table in tables where !seeded.contains(table) {
          guard try to.row("SELECT count(*) AS n FROM \(table)")?.int("n") == 0 else {
            throw LarderError.invalidArgument("the destination catalog is not empty (\(table) has rows)")
          }
        }
        // The destination's migration made its own key: the source's replaces it.
        try to.execute("DELETE FROM settings")
        try to.execute("DELETE FROM blob_fences")
        var counts: [(String, Int64)] = []
        for table in tables {
          try from.forEachRow("SELECT * FROM \(table)") { row in
            let columns = row.columns.map { "\"\($0)\"" }.joined(separator: ", ")
            let marks = Array(repeating: "?", count: row.columns.count).joined(separator: ", ")
            try to.execute("INSERT INTO \(table)(\(columns)) VALUES (\(marks))", row.values)
          }
          let sourceCount = try from.row("SELECT count(*) AS n FROM \(table)")?.int("n") ?? -1
          let targetCount = try to.row("SELECT count(*) AS n FROM \(table)")?.int("n") ?? -2
          guard sourceCount == targetCount else {
            throw LarderError.invalidArgument("\(table): \(sourceCount) rows in the source, \(targetCount) copied")
          }
          counts.append((table, targetCount))
        }
        // The outbox does not move (its events were the source's to deliver): every subscription
        // starts at the end of the destination's.
        let end = try ObjectEvents.endOfOutbox(to)
        try to.execute(
          "UPDATE event_subscriptions SET head_order = ?, head_seq = ?, head_owner = NULL, head_until = NULL",
          [end.transactionOrder, end.sequence])
        // Fences are never handed out twice: PostgreSQL's counter is a sequence, which must
        // start past every fence the source handed out (a reused one could be a condemned address).
        let top = try [
          "SELECT fence AS f FROM blob_fences WHERE name = 'counter'", "SELECT max(fence) AS f FROM blobs",
          "SELECT max(fence) AS f FROM blob_deletions",
        ].map { try from.row($0)?.int("f") ?? 0 }.max() ?? 0
        if top > 0, let catchUp = to.dialect.fenceCounterCatchUp { _ = try to.row(catchUp, [top]) }
        return counts
      }
    }
  }
}
