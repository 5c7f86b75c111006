import Foundation

/// The embedded catalog: `larder.sqlite` in the data directory, in WAL mode.
///
/// One writer connection (every write `BEGIN IMMEDIATE`, one at a time across threads and
/// processes); commits are told by the WAL-index header's change counter (``WALIndexWatch``), a
/// read of mapped memory, so observers poll it; one machine opens the file, so the data
/// directory's `gc.lock` alone keeps collectors apart.
struct SQLiteCatalogEngine: CatalogEngine {
  let path: String

  var dialect: any SQLDialect { SQLiteDialect() }
  var readerLimit: Int? { nil }
  var concurrentWriters: Bool { false }

  func connect(readOnly: Bool) throws -> any Database { try SQLiteDatabase(path: path, readOnly: readOnly) }

  func migrate(_ writer: any Database) throws { try Migrations.run(on: writer) }

  func schemaVersion(_ db: any Database) throws -> Int { try Migrations.version(of: db) }

  /// The writer has put the file in WAL mode and read it, so its index is mapped now.
  func commitStamp(on writer: any Database) -> (@Sendable () -> Int64?)? {
    guard let watch = (writer as? SQLiteDatabase).flatMap({ WALIndexWatch(connection: $0) }) else { return nil }
    return { watch.stamp() }
  }

  func commitFeed(catalog: Catalog, poll: Duration) -> any CommitFeed { StampFeed(catalog: catalog, poll: poll) }

  func checkpoint(_ writer: any Database) throws { try writer.execute("PRAGMA wal_checkpoint(TRUNCATE)") }

  func lockCollectors(catalog: Catalog) throws -> (any CatalogSessionLock)? { nil }

  func integrityProblems(_ db: any Database) throws -> [CatalogIntegrityProblem] {
    var problems: [CatalogIntegrityProblem] = []
    for row in try db.rows("PRAGMA integrity_check") {
      let line = row.values.first.flatMap { if case .text(let t) = $0 { t } else { nil } } ?? "?"
      if line != "ok" { problems.append(.corrupt(line)) }
    }
    for row in try db.rows("PRAGMA foreign_key_check") {
      problems.append(.danglingReference(table: row.string("table") ?? "?", parent: row.string("parent") ?? "?"))
    }
    return problems
  }

  /// Polls the commit stamp: it says that someone committed, never what.
  final class StampFeed: CommitFeed {
    private let catalog: Catalog
    private let poll: TimeInterval
    private var seen: Int64?
    private var started = false

    init(catalog: Catalog, poll: Duration) {
      self.catalog = catalog
      self.poll = poll.timeInterval
      seen = catalog.commitStamp()
    }

    func next(timeout: Duration) throws -> CommitNews {
      guard started else {
        started = true
        return .unknown
      }
      Thread.sleep(forTimeInterval: min(poll, timeout.timeInterval))
      // nil: the header was being rewritten at that instant; the next look tells.
      guard let stamp = catalog.commitStamp(), stamp != seen else { return .announced([]) }
      seen = stamp
      return .unknown
    }
  }
}
