import Foundation
import Larder
import LarderTestSupport
import Testing

/// The catalog's connections run with the durability and integrity settings the design requires.
@Suite struct CatalogTests {
  private func pragmas(_ db: Database) throws -> [String: SQLValue] {
    var out: [String: SQLValue] = [:]
    for name in ["journal_mode", "synchronous", "foreign_keys", "busy_timeout"] {
      out[name] = try db.row("PRAGMA \(name)")?[0]
    }
    return out
  }

  @Test(TestCatalog.sqliteOnly) func readerAndWriterConnectionsUseTheRequiredPragmas() throws {
    let larder = try TestStore.temporary()
    for settings in [
      try larder.catalog.read { try pragmas($0) }, try larder.catalog.write { try pragmas($0) },
    ] {
      #expect(settings["journal_mode"] == .text("wal"))
      #expect(settings["synchronous"] == .integer(2))  // FULL
      #expect(settings["foreign_keys"] == .integer(1))
      guard case .integer(let timeout) = settings["busy_timeout"] else {
        Issue.record("busy_timeout missing: \(settings)")
        continue
      }
      #expect(timeout > 0)
    }
  }

  @Test func datesBeyondSixtyFourBitMillisecondsClampInsteadOfTrapping() throws {
    #expect(Date(timeIntervalSince1970: 1e300).sqlValue == .integer(.max))
    #expect(Date(timeIntervalSince1970: -1e300).sqlValue == .integer(.min))
    #expect(Date(timeIntervalSince1970: 1.5).sqlValue == .integer(1500))
    // A collector asked for an absurd grace keeps everything instead of crashing.
    let larder = try TestStore.temporary()
    _ = try larder.files.put(Data("young".utf8))
    let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .seconds(Int64.max)))
    #expect(report.filesReleased == 0)
  }

  @Test func blobFilesAreReadOnly() throws {
    let larder = try TestStore.temporary()
    let file = try larder.files.put(Data("immutable".utf8))
    let path = larder.blobs.path(forHex: file.sha256)
    var st = stat()
    #expect(stat(path, &st) == 0)
    #expect(st.st_mode & 0o7777 == 0o444)
    #expect((st.st_mode & S_IFMT) == S_IFREG)
    #expect(st.st_nlink == 1)  // the temp name is gone
    if geteuid() != 0 {
      // Root ignores permission bits, so this part only means something for other users.
      #expect(open(path, O_WRONLY | O_CLOEXEC) == -1)
      #expect(errno == EACCES)
    }
  }

  @Test(TestCatalog.sqliteOnly) func foreignKeysAreEnforced() throws {
    let larder = try TestStore.temporary()
    let file = try larder.files.put(Data("referenced".utf8))
    let missing = [UInt8](repeating: 7, count: 32)
    let insertError = #expect(throws: DatabaseError.self) {
      try larder.catalog.write { db in
        try db.execute(
          "INSERT INTO files(id, blob_sha256, size, md5, content_type, created_at) VALUES ('x', ?, 0, x'00', 'a/b', 0)",
          [missing])
      }
    }
    #expect(insertError?.isForeignKeyViolation == true)
    let deleteError = #expect(throws: DatabaseError.self) {
      try larder.catalog.write { db in try db.execute("DELETE FROM blobs") }
    }
    #expect(deleteError?.isConstraint == true)
    #expect(try larder.storeCounts() == [1, 1, 0])
    #expect(try larder.files.data(of: file) == Data("referenced".utf8))
  }

  @Test(TestCatalog.sqliteOnly) func errorsCarryTheFailingSQL() throws {
    let larder = try TestStore.temporary()
    let error = #expect(throws: DatabaseError.self) {
      try larder.catalog.read { db in try db.row("SELECT nope FROM blobs") }
    }
    #expect(error?.sql == "SELECT nope FROM blobs")
    #expect(error?.message == "no such column: nope")
    let arity = #expect(throws: DatabaseError.self) {
      try larder.catalog.read { db in try db.row("SELECT ? + ?", [1]) }
    }
    #expect(arity?.message == "expected 2 arguments, got 1")
  }

  @Test func writeTransactionRollsBackOnError() throws {
    let larder = try TestStore.temporary()
    #expect(throws: InjectedFailure.self) {
      try larder.catalog.write { db in
        try db.execute(
          "INSERT INTO records(type, id, body, created_at, updated_at) VALUES ('t', '1', '{}', 0, 0)")
        throw InjectedFailure()
      }
    }
    #expect(try larder.storeRowCount("records") == 0)
    // The writer connection is usable again afterwards.
    try larder.catalog.write { db in
      try db.execute("INSERT INTO records(type, id, body, created_at, updated_at) VALUES ('t', '1', '{}', 0, 0)")
    }
    #expect(try larder.storeRowCount("records") == 1)
  }

  @Test(TestCatalog.sqliteOnly) func valuesRoundTripThroughStatements() throws {
    let larder = try TestStore.temporary()
    let row = try larder.catalog.read { db in
      try db.row(
        "SELECT ? AS i, ? AS r, ? AS t, ? AS b, ? AS e, ? AS n, ? AS z, length(CAST(? AS BLOB)) AS zl, ? AS empty",
        [Int64.min, 1.5, "naïve \u{1F600}", [UInt8]([0, 1, 255]), [UInt8](), String?.none, "a\u{0}b", "a\u{0}b", ""])
    }
    #expect(row?["i"] == .integer(Int64.min))
    #expect(row?["r"] == .real(1.5))
    #expect(row?["t"] == .text("naïve \u{1F600}"))
    #expect(row?["b"] == .blob([0, 1, 255]))
    #expect(row?["e"] == .blob([]))
    #expect(row?["n"] == .null)
    // Text is bound and read by length, not as a C string: an embedded NUL survives.
    #expect(row?["z"] == .text("a\u{0}b"))
    #expect(row?["zl"] == .integer(3))
    #expect(row?["empty"] == .text(""))
  }
}
