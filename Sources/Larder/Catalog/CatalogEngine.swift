/// A catalog engine besides the data directory's SQLite: what ``Catalog`` needs to pool its
/// connections and bring the schema up to date. PostgreSQL's is in `LarderPostgres`
/// (`StoreBackends.postgres`); the core links no client library of its own for it.
package protocol CatalogEngine: Sendable {
  var dialect: any SQLDialect { get }
  /// Opens a new connection to the store's catalog.
  func connect() throws -> any Database
  /// Brings the schema up to date on `writer`, in one write transaction.
  func migrate(_ writer: any Database) throws
  /// The schema version on `db` without changing anything (0 for an empty catalog).
  func schemaVersion(_ db: any Database) throws -> Int
  /// How many reader connections may be open at once besides the writer (each may be a server
  /// process); nil: as many as readers ask for.
  var readerLimit: Int? { get }
}

/// A connection that can hold a lock for as long as its session lives: the collector's, so that
/// one collector runs at a time across every node sharing the catalog.
package protocol SessionLockingDatabase: Database {
  /// The key of this store's collector lock.
  var collectorLockKey: Int64 { get }
  /// Takes `key` without waiting; false when another session holds it.
  func tryLock(_ key: Int64) throws -> Bool
  func unlock(_ key: Int64) throws
}

/// A connection that tells other sessions of commits (PostgreSQL's `LISTEN/NOTIFY`), so model
/// observers in other processes and on other nodes hear of them.
package protocol CommitAnnouncingDatabase: Database {
  /// Announces, inside the current write transaction, that models of `types` changed; the
  /// announcement is delivered exactly when (and only if) the transaction commits.
  func announce(modelTypes types: [String]) throws
  /// Starts hearing this store's announcements on this connection.
  func listenForModelChanges() throws
  /// The model types announced since the last call, waiting up to `timeout` for the first.
  /// - Throws: ``DatabaseError`` (connection lost) when the server went away.
  func modelChanges(timeout: Duration) throws -> [String]
}
