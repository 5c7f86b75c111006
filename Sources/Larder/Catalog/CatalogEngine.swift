import Foundation

/// What a catalog is built on: how ``Catalog`` connects, migrates, watches commits, keeps
/// collectors apart and snapshots, asked of the engine rather than of which catalog it is.
///
/// Two engines: ``SQLiteCatalogEngine`` (the data directory's `larder.sqlite`, the embedded
/// default) and PostgreSQL's in `LarderPostgres` (`StoreBackends.postgres`), so the core links
/// no client library for it. ``Catalog/init(location:sqlitePath:backends:maxIdleReaders:reserve:writers:readOnly:)``
/// picks one, once; nothing else asks which.
package protocol CatalogEngine: Sendable {
  var dialect: any SQLDialect { get }
  /// Opens a new connection to the store's catalog; with `readOnly` it can change nothing.
  func connect(readOnly: Bool) throws -> any Database
  /// Brings the schema up to date on `writer`, in one write transaction.
  func migrate(_ writer: any Database) throws
  /// The schema version on `db` without changing anything (0 for an empty catalog).
  func schemaVersion(_ db: any Database) throws -> Int
  /// How many reader connections may be open at once besides the writer (each may be a server
  /// process); nil: as many as readers ask for.
  var readerLimit: Int? { get }
  /// Whether writes run on a pool of connections at once (keyed writes, ``WriteKey``); false:
  /// one writer connection, one write at a time.
  var concurrentWriters: Bool { get }
  /// A reading of a counter every commit moves, in any process (``Catalog/commitStamp()``),
  /// over the migrated `writer`; nil when the engine cannot tell commits that cheaply.
  func commitStamp(on writer: any Database) -> (@Sendable () -> Int64?)?
  /// Hears of commits from any process or node (model observers, the event deliverer).
  /// `poll`: how often an engine that can only poll looks.
  func commitFeed(catalog: Catalog, poll: Duration) -> any CommitFeed
  /// Folds what the write-ahead log holds into the catalog, when the engine has such a log of
  /// its own (a stopped service leaves one self-contained file).
  func checkpoint(_ writer: any Database) throws
  /// Takes, without waiting, the lock that lets one collector (or repairing verifier) run at a
  /// time across every process and node sharing the catalog, held until released; nil when the
  /// data directory's `gc.lock` already excludes all of them (one file on one machine).
  /// - Throws: ``MaintenanceError/collectorBusy(lockPath:)`` when another session holds it.
  func lockCollectors(catalog: Catalog) throws -> (any CatalogSessionLock)?
  /// What the engine's own consistency checks find wrong with the catalog (`larder verify`);
  /// none for an engine that enforces every constraint at once and has no such check.
  func integrityProblems(_ db: any Database) throws -> [CatalogIntegrityProblem]
  /// Inside the write transaction that commits a backup's pin (``SnapshotPins``): returns once
  /// no transaction that deleted blob rows without seeing the pin can still commit after the
  /// backup's snapshot is taken.
  func holdOffCollectors(_ writer: any Database) throws
  /// Writes the catalog as of one instant to a new SQLite catalog file at `path` (a backup's
  /// snapshot, ``CatalogSnapshotFile``), on `db`, outside any transaction of the caller's.
  func writeSnapshot(_ db: any Database, to path: String) throws
}

/// A lock a catalog session holds until ``release()`` (or until the session ends).
package protocol CatalogSessionLock: AnyObject {
  func release()
}

/// What a catalog engine's own checks found (``CatalogEngine/integrityProblems(_:)``).
package enum CatalogIntegrityProblem: Equatable {
  /// The engine's integrity check failed, as it says.
  case corrupt(String)
  /// A row of `table` refers to a missing row of `parent`.
  case danglingReference(table: String, parent: String)
}

/// What ``CommitFeed/next(timeout:)`` heard.
package enum CommitNews: Equatable {
  /// Anything may have been committed (the engine cannot tell what, or listened only now).
  case unknown
  /// These announcements (model types, or ``ObjectChangeOutbox/announcement``) committed; none
  /// when the wait ran out.
  case announced(Set<String>)
}

/// Commits heard by one thread at a time (``CatalogEngine/commitFeed(catalog:poll:)``).
package protocol CommitFeed: AnyObject {
  /// Returns what was committed since the last call, waiting at most `timeout` (an engine that
  /// polls returns after one look). The first call answers ``CommitNews/unknown``: whatever was
  /// committed before anyone listened.
  /// - Throws: ``DatabaseError`` when its connection was lost; make a new feed then.
  func next(timeout: Duration) throws -> CommitNews
}

/// A connection that tells other sessions of commits (PostgreSQL's `NOTIFY`), so model
/// observers and event deliverers in other processes and on other nodes hear of them.
package protocol CommitAnnouncingDatabase: Database {
  /// Announces, inside the current write transaction, that models of `types` changed; the
  /// announcement is delivered exactly when (and only if) the transaction commits.
  func announce(modelTypes types: [String]) throws
}
