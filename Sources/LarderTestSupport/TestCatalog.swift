import Foundation
import Larder
import Testing

/// Which catalog this test run's stores use: SQLite in their data directory, or, when
/// `LARDER_TEST_CATALOG` names a PostgreSQL database (`make test`'s second pass), a fresh schema
/// of it per store (see ``TestStore``). One definition for every test target, so the store,
/// server and CLI suites split their runs the same way.
public enum TestCatalog {
  public static let isPostgres = TestStore.catalogBase != nil

  /// For tests of SQLite itself (its file, PRAGMAs, WAL, raw edits of `larder.sqlite`): they
  /// run in the SQLite pass and say so in the PostgreSQL one.
  public static let sqliteOnly = Testing.ConditionTrait.enabled(if: !isPostgres, "tests the SQLite catalog file itself")

  /// Rows breaking a foreign key: SQLite's `PRAGMA foreign_key_check`; PostgreSQL checks every
  /// key at each statement, so none can exist there.
  package static func foreignKeyViolations(_ db: Database) throws -> Int {
    db.dialect == .sqlite ? try db.rows("PRAGMA foreign_key_check").count : 0
  }
}

/// Where this test run's stores keep their blobs: the data directory, or, when
/// `LARDER_TEST_BLOBS` names a bucket (`make test`'s S3 pass), a prefix of it per store (see
/// ``TestStore``).
public enum TestBlobs {
  public static let isS3 = TestStore.blobsBase != nil

  /// For tests that break the data directory's `blobs/` on purpose to make a write fail: they
  /// run in the filesystem pass and say so in the S3 one.
  public static let filesystemOnly = Testing.ConditionTrait.enabled(
    if: !isS3, "plants a fault in the data directory's blobs/")
}
