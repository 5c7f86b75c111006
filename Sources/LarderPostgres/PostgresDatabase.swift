internal import CPostgres
import Foundation
import Larder

/// One PostgreSQL connection (libpq), speaking the same ``Database`` shape as the SQLite one.
///
/// SQL arrives with `?` placeholders; each distinct statement is rewritten to `$1…$n` once
/// (outside quotes), prepared once per connection, and then executed by name. Arguments go as
/// text (bytea as binary) with their types inferred by the server from where they stand, so one
/// prepared statement serves every argument type SQLite would take there.
/// ```swift
/// let db = try PostgresDatabase(conninfo: "postgresql://postgres@127.0.0.1:15432/postgres", schema: "media")
/// try db.execute("INSERT INTO t VALUES (?)", [42])
/// ```
/// A lost connection is reset at the start of the next transaction (or statement outside one),
/// so a pooled connection heals after the server comes back.
package final class PostgresDatabase: CommitAnnouncingDatabase, KeyedWriteDatabase {
  private let handle: OpaquePointer
  package let schema: String?
  package var dialect: any SQLDialect { PostgresDialect() }
  package private(set) var changes = 0
  private var cache: [String: Prepared] = [:]
  private var inTransaction = false
  /// The key of the catalog's one write lock (see ``writeLockKey(schema:)``).
  let writeLock: Int64

  private final class Prepared {
    let name: String
    let parameterCount: Int
    var layout: RowLayout?
    init(name: String, parameterCount: Int) {
      self.name = name
      self.parameterCount = parameterCount
    }
  }

  /// Connects and selects `schema` (created first when `create` is true).
  /// - Throws: ``DatabaseError`` with SQLSTATE `08001` when the server cannot be reached.
  package init(conninfo: String, schema: String?, create: Bool = false) throws(DatabaseError) {
    guard let connection = PQconnectdb(conninfo) else {
      throw DatabaseError(extendedCode: 0, message: "out of memory", sql: nil, sqlState: "08001")
    }
    guard PQstatus(connection) == CONNECTION_OK else {
      let message = String(cString: PQerrorMessage(connection)).trimmingCharacters(in: .whitespacesAndNewlines)
      PQfinish(connection)
      throw DatabaseError(extendedCode: 0, message: message, sql: nil, sqlState: "08001")
    }
    handle = connection
    self.schema = schema
    writeLock = Self.writeLockKey(schema: schema)
    try configure(create: create)
  }

  deinit { PQfinish(handle) }

  private func configure(create: Bool) throws(DatabaseError) {
    // NOTICEs ("already exists, skipping") would go to stderr. The timeouts bound what one
    // stuck session can hold up (see ``sessionSettings``).
    var setup = "SET client_min_messages TO warning; SET TIME ZONE 'UTC'; " + Self.sessionSettings
    if let schema {
      if create { setup += "CREATE SCHEMA IF NOT EXISTS \"\(schema)\";" }
      setup += "SET search_path TO \"\(schema)\";"
    }
    try executeScript(setup)
  }

  /// Larder's advisory-lock keys: a fixed tag in the high 32 bits, the schema's FNV-1a hash
  /// in the low 32, so stores in different schemas of one database do not serialise each other.
  static func lockKey(tag: UInt32, schema: String?) -> Int64 {
    var hash: UInt32 = 0x811c_9dc5
    for byte in (schema ?? "public").utf8 { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }
    return Int64(bitPattern: UInt64(tag) << 32 | UInt64(hash))
  }

  /// The store's write lock (`LRDW`): every write transaction takes it first, exclusively
  /// (unkeyed writes) or shared (keyed writes, see ``writeKeyLock(_:)``).
  static func writeLockKey(schema: String?) -> Int64 { lockKey(tag: 0x4C52_4457, schema: schema) }
  /// The collector's lock (`LRDG`), held for a whole gc run by its session.
  static func collectorLockKey(schema: String?) -> Int64 { lockKey(tag: 0x4C52_4447, schema: schema) }

  package var collectorLockKey: Int64 { Self.collectorLockKey(schema: schema) }

  /// The high 32 bits of the store-wide keys, which no ``WriteKey`` may take.
  static let reservedTags: Set<UInt32> = [0x4C52_4457, 0x4C52_4447]

  /// The advisory-lock key of `key` in this store: keyed by the schema too, so stores in
  /// different schemas of one database never wait on each other's keys
  /// (``WriteKey/advisoryKey(namespace:reservedTags:)``).
  func writeKeyLock(_ key: WriteKey) -> Int64 {
    key.advisoryKey(namespace: schema ?? "public", reservedTags: Self.reservedTags)
  }

  /// Resets a connection the server dropped; prepared statements die with it.
  private func reconnectIfLost() throws(DatabaseError) {
    guard !inTransaction, PQstatus(handle) == CONNECTION_BAD else { return }
    PQreset(handle)
    cache.removeAll()
    guard PQstatus(handle) == CONNECTION_OK else {
      throw DatabaseError(
        extendedCode: 0, message: String(cString: PQerrorMessage(handle)), sql: nil, sqlState: "08001")
    }
    try configure(create: false)
  }

  /// Throws unless `result` succeeded; frees it when throwing.
  private func check(_ result: OpaquePointer?, sql: String) throws(DatabaseError) -> OpaquePointer {
    guard let result else {
      throw DatabaseError(extendedCode: 0, message: String(cString: PQerrorMessage(handle)), sql: sql, sqlState: "08006")
    }
    switch PQresultStatus(result) {
    case PGRES_COMMAND_OK, PGRES_TUPLES_OK: return result
    default:
      // PG_DIAG_SQLSTATE is the character macro 'C', which Swift does not import.
      var state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
      if PQstatus(handle) == CONNECTION_BAD { state = "08006" }
      let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
      PQclear(result)
      throw DatabaseError(extendedCode: 0, message: message, sql: sql, sqlState: state ?? "XX000")
    }
  }

  /// `sql` with each `?` outside quotes replaced by `$1…$n`, and n.
  static func numbered(_ sql: String) -> (String, Int) {
    var out = ""
    out.reserveCapacity(sql.utf8.count + 16)
    var count = 0
    var quote: Character?
    for c in sql {
      if let q = quote {
        if c == q { quote = nil }
        out.append(c)
      } else if c == "'" || c == "\"" {
        quote = c
        out.append(c)
      } else if c == "?" {
        count += 1
        out += "$\(count)"
      } else {
        out.append(c)
      }
    }
    return (out, count)
  }

  private func prepared(_ sql: String) throws(DatabaseError) -> Prepared {
    if let cached = cache[sql] { return cached }
    let (text, count) = Self.numbered(sql)
    let statement = Prepared(name: "l\(cache.count)", parameterCount: count)
    let result = try check(PQprepare(handle, statement.name, text, 0, nil), sql: sql)
    PQclear(result)
    cache[sql] = statement
    return statement
  }

  /// Executes `sql` with `arguments`; the caller clears the result.
  private func run(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) -> OpaquePointer {
    try reconnectIfLost()
    let statement = try prepared(sql)
    guard statement.parameterCount == arguments.count else {
      throw DatabaseError(
        extendedCode: 0, message: "expected \(statement.parameterCount) arguments, got \(arguments.count)", sql: sql,
        sqlState: "08P01")
    }
    var values: [UnsafeMutablePointer<CChar>?] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
    values.reserveCapacity(arguments.count)
    defer { for value in values { free(value) } }
    for argument in arguments {
      switch argument.sqlValue {
      case .null:
        values.append(nil)
        lengths.append(0)
        formats.append(0)
      case .blob(let bytes):
        let buffer = malloc(max(bytes.count, 1))!.assumingMemoryBound(to: CChar.self)
        bytes.withUnsafeBytes { raw in
          if let base = raw.baseAddress { memcpy(buffer, base, raw.count) }
        }
        values.append(buffer)
        lengths.append(Int32(bytes.count))
        formats.append(1)
      case .integer(let v):
        values.append(strdup(String(v)))
        lengths.append(0)
        formats.append(0)
      case .real(let v):
        let text = v.isNaN ? "NaN" : v.isInfinite ? (v < 0 ? "-Infinity" : "Infinity") : "\(v)"
        values.append(strdup(text))
        lengths.append(0)
        formats.append(0)
      case .text(let v):
        values.append(strdup(v))
        lengths.append(0)
        formats.append(0)
      }
    }
    let result = values.withUnsafeBufferPointer { valuePointers in
      valuePointers.withMemoryRebound(to: UnsafePointer<CChar>?.self) { constValues in
        PQexecPrepared(
          handle, statement.name, Int32(arguments.count), constValues.baseAddress, lengths, formats, 0)
      }
    }
    let checked = try check(result, sql: sql)
    changes = Int(String(cString: PQcmdTuples(checked))) ?? 0
    return checked
  }

  package func execute(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) {
    PQclear(try run(sql, arguments))
  }

  package func executeScript(_ sql: String) throws(DatabaseError) {
    let result = try check(PQexec(handle, sql), sql: sql)
    PQclear(result)
  }

  package func rows(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) -> [Row] {
    let result = try run(sql, arguments)
    defer { PQclear(result) }
    let layout = layout(of: result, sql: sql)
    return (0..<PQntuples(result)).map { Self.row(result, $0, layout) }
  }

  package func row(_ sql: String, _ arguments: [any SQLBindable]) throws(DatabaseError) -> Row? {
    let result = try run(sql, arguments)
    defer { PQclear(result) }
    guard PQntuples(result) > 0 else { return nil }
    return Self.row(result, 0, layout(of: result, sql: sql))
  }

  /// Holds the whole result in memory (libpq's default): the callers' scans are paged by key.
  package func forEachRow(_ sql: String, _ arguments: [any SQLBindable], _ body: (Row) throws -> Void) throws {
    for row in try rows(sql, arguments) { try body(row) }
  }

  /// Column names are fixed once a statement is prepared: read them once.
  private func layout(of result: OpaquePointer, sql: String) -> RowLayout {
    if let layout = cache[sql]?.layout { return layout }
    let layout = RowLayout(columns: (0..<PQnfields(result)).map { String(cString: PQfname(result, $0)) })
    cache[sql]?.layout = layout
    return layout
  }

  private static func row(_ result: OpaquePointer, _ index: Int32, _ layout: RowLayout) -> Row {
    let count = PQnfields(result)
    var values: [SQLValue] = []
    values.reserveCapacity(Int(count))
    for column in 0..<count {
      guard PQgetisnull(result, index, column) == 0, let raw = PQgetvalue(result, index, column) else {
        values.append(.null)
        continue
      }
      let length = Int(PQgetlength(result, index, column))
      let bytes = UnsafeRawBufferPointer(start: raw, count: length)
      switch PQftype(result, column) {
      case 20, 21, 23, 26:  // int8, int2, int4, oid
        values.append(.integer(Int64(String(decoding: bytes, as: UTF8.self)) ?? 0))
      case 1700:  // numeric (sum of bigint): an integer when it is one
        let text = String(decoding: bytes, as: UTF8.self)
        values.append(Int64(text).map(SQLValue.integer) ?? .real(Double(text) ?? 0))
      case 700, 701:
        let text = String(decoding: bytes, as: UTF8.self)
        values.append(.real(Double(text) ?? (text == "Infinity" ? .infinity : text == "-Infinity" ? -.infinity : .nan)))
      case 16:  // bool
        values.append(.integer(bytes.first == UInt8(ascii: "t") ? 1 : 0))
      case 17:  // bytea, text form `\x<hex>`
        values.append(.blob(decodeHexBytea(bytes)))
      default:
        values.append(.text(String(decoding: bytes, as: UTF8.self)))
      }
    }
    return Row(layout: layout, values: values)
  }

  private static func decodeHexBytea(_ text: UnsafeRawBufferPointer) -> [UInt8] {
    guard text.count >= 2 else { return [] }
    func nibble(_ c: UInt8) -> UInt8 { c <= 0x39 ? c &- 0x30 : (c | 0x20) &- 0x61 &+ 10 }
    var out = [UInt8]()
    out.reserveCapacity((text.count - 2) / 2)
    var i = 2
    while i + 1 < text.count {
      out.append(nibble(text[i]) << 4 | nibble(text[i + 1]))
      i += 2
    }
    return out
  }

  /// PostgreSQL offers no cheap "did anyone commit?" probe, so nothing is cached across statements.

  /// Every session's limits, so that no stuck statement, lock wait or idle session holds the
  /// catalog up for long (a hung node's session otherwise lasts as long as TCP lets it):
  /// - `statement_timeout` 300 s: no statement of Larder's runs that long (migrations lift it);
  /// - `lock_timeout` 120 s: a write waiting for the write lock gives up (503) after twice the
  ///   time a dead holder can keep it;
  /// - `idle_in_transaction_session_timeout` 600 s for reads (a long verify streams rows between
  ///   calls), and 60 s inside write transactions (`SET LOCAL` at BEGIN): a writer that stops
  ///   talking while it holds the write lock is cut off and its transaction rolled back.
  /// TCP keepalives and `tcp_user_timeout` come with the connection string (``PostgresCatalogEngine``).
  static let sessionSettings =
    "SET statement_timeout = '300s'; SET lock_timeout = '120s'; SET idle_in_transaction_session_timeout = '600s';"

  /// Write transactions are READ COMMITTED (pinned, whatever `default_transaction_isolation`
  /// says: every statement then reads what committed before it, after the lock wait) and take the
  /// catalog's write lock exclusively with BEGIN (one round trip); read transactions are
  /// REPEATABLE READ READ ONLY: one snapshot, as SQLite's read transactions.
  /// `synchronous_commit = off` for the session meanwhile (a reconnect starts a session with
  /// the server's default, which is durable).
  package func committingLazily<T>(_ body: () throws -> T) throws -> T {
    try executeScript("SET synchronous_commit = off")
    defer { try? executeScript("SET synchronous_commit = DEFAULT") }
    return try body()
  }

  package func transaction<T>(immediate: Bool, _ body: (Database) throws -> T) throws -> T {
    try transaction(
      begin: immediate
        ? Self.beginWrite + "SELECT pg_advisory_xact_lock(\(writeLock))"
        : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", body)
  }

  /// A keyed write: the store's lock shared, then each key's exclusively in ascending order of
  /// their numbers, all in the BEGIN's round trip. Every keyed transaction takes its keys in
  /// that one order and holds no other key first, so keyed writes never deadlock each other;
  /// an unkeyed write waits for the shared holders to finish, and new keyed writes queue behind
  /// it (PostgreSQL grants a lock only after earlier conflicting waiters), so it is not starved.
  package func transaction<T>(locking keys: Set<WriteKey>, _ body: (Database) throws -> T) throws -> T {
    let numbers = Set(keys.map(writeKeyLock)).sorted()
    let locks = numbers.map { "SELECT pg_advisory_xact_lock(\($0))" }.joined(separator: "; ")
    let begin = Self.beginWrite + "SELECT pg_advisory_xact_lock_shared(\(writeLock)); " + locks
    return try transaction(begin: begin, body)
  }

  private static let beginWrite =
    "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL idle_in_transaction_session_timeout = '60s'; "

  private func transaction<T>(begin: String, _ body: (Database) throws -> T) throws -> T {
    try reconnectIfLost()
    var failure: DatabaseError?
    do { try executeScript(begin) } catch { failure = error }
    if let failure {
      // libpq learns that the server went away (a restart) only when it is used: nothing has
      // run in this transaction yet, so a new session can safely start it again.
      guard failure.isConnectionLost else {
        // A lock wait that timed out (or was cancelled) leaves the transaction open and aborted:
        // end it, or the connection's next BEGIN would fail too.
        if PQstatus(handle) == CONNECTION_OK { try? executeScript("ROLLBACK") }
        throw failure
      }
      try reconnectIfLost()
      try executeScript(begin)
    }
    inTransaction = true
    defer { inTransaction = false }
    do {
      let value = try body(self)
      try commit()
      return value
    } catch {
      if PQstatus(handle) == CONNECTION_OK { try? executeScript("ROLLBACK") }
      throw error
    }
  }

  /// COMMIT of a transaction a failed statement aborted answers `ROLLBACK`, not an error.
  private func commit() throws(DatabaseError) {
    let result = try check(PQexec(handle, "COMMIT"), sql: "COMMIT")
    defer { PQclear(result) }
    guard String(cString: PQcmdStatus(result)) == "COMMIT" else {
      throw DatabaseError(
        extendedCode: 0, message: "the transaction was aborted by an earlier error and rolled back", sql: "COMMIT",
        sqlState: "25P02")
    }
  }

  /// The `LISTEN/NOTIFY` channel on which this store's model writes are announced (one per
  /// schema: channels are database-wide).
  var modelChannel: String { "larder_models_" + String(UInt64(bitPattern: writeLock), radix: 16) }

  package func announce(modelTypes types: [String]) throws {
    for type in types { try execute("SELECT pg_notify(?, ?)", [modelChannel, type]) }
  }

  package func listenForModelChanges() throws { try executeScript("LISTEN \(modelChannel)") }

  /// Payloads of the notifications that arrived, waiting up to `timeout` for the first.
  /// - Throws: ``DatabaseError`` (connection lost) when the server went away.
  package func modelChanges(timeout: Duration) throws -> [String] { try notifications(timeout: timeout) }

  private func notifications(timeout: Duration) throws(DatabaseError) -> [String] {
    var out = Self.drainNotifications(handle)
    guard out.isEmpty else { return out }
    var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
    let ms = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
    guard poll(&descriptor, 1, ms) > 0 else { return [] }
    guard PQconsumeInput(handle) == 1 else {
      throw DatabaseError(
        extendedCode: 0, message: String(cString: PQerrorMessage(handle)), sql: nil, sqlState: "08006")
    }
    out = Self.drainNotifications(handle)
    return out
  }

  private static func drainNotifications(_ handle: OpaquePointer) -> [String] {
    var out: [String] = []
    while let notice = PQnotifies(handle) {
      out.append(String(cString: notice.pointee.extra))
      PQfreemem(notice)
    }
    return out
  }

  /// Takes a session-level advisory lock without waiting; false if another session holds it.
  package func tryLock(_ key: Int64) throws -> Bool {
    try row("SELECT pg_try_advisory_lock(?::bigint) AS held", [key])?.int("held") == 1
  }

  package func unlock(_ key: Int64) throws {
    try execute("SELECT pg_advisory_unlock(?::bigint)", [key])
  }
}

@available(*, unavailable)
extension PostgresDatabase: Sendable {}
