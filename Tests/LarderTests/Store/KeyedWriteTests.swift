import Foundation
import LarderCrypto
import LarderTestSupport
import Synchronization
import Testing

@testable import Larder

/// Keyed write locks on a PostgreSQL catalog (ARCHITECTURE.md, "Keyed write locks"): writes
/// of different contents and names commit together, writes of one key in turn, and a write
/// without keys alone. Each test holds one transaction open from inside its body (waiting on a
/// semaphore) and watches what another write does meanwhile. Runs in `make test`'s PostgreSQL
/// pass (on SQLite every write runs alone, which is what these tests would refute).
@Suite(.enabled(if: TestCatalog.isPostgres, "needs LARDER_TEST_CATALOG (make test's PostgreSQL pass)"))
struct KeyedWriteTests {
  /// How long a write that should run beside an open transaction may take (generous: a loaded
  /// machine), and how long one that should wait is watched not finishing.
  static let runsBeside = 10.0
  static let waits = 2.0

  /// A commit of content A holds its transaction open; a put of content B under another name
  /// commits meanwhile. With one store-wide lock it would wait for A.
  @Test func writesOfDifferentContentsCommitWhileAnotherIsOpen() throws {
    let larder = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    let a = try Self.stage(larder, seed: 1)
    let b = try Self.stage(larder, seed: 2)
    var visible = false
    let committedBeside = try Self.whileOpen(
      Self.holdingCommit(larder, a),
      run: { _ = try larder.objects.put(bucket: "k", name: "b", staged: b) }, watch: Self.runsBeside
    ) {
      // Seen by a reader while A's transaction is still open.
      visible = try larder.objects.find(bucket: "k", name: "b") != nil
    }
    #expect(committedBeside, "a put of other content waited for an open commit (one store-wide lock?)")
    #expect(visible)
    #expect(try larder.storeCounts() == [2, 2, 1])
    let times = larder.catalogLockTimes()
    #expect(times.keyedHeld.count >= 2)
  }

  /// Two commits of the same bytes serialise on the content's key; then 16 concurrent uploads
  /// of one content under 16 names leave exactly one blob row with 16 files, and once the
  /// objects are deleted the collector releases the blob (rows and bytes).
  @Test func writesOfOneContentSerialiseAndItsReferencesStayExact() throws {
    let larder = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    let first = try Self.stage(larder, seed: 3)
    let again = try Self.stage(larder, seed: 3)
    let ranBeside = try Self.whileOpen(
      Self.holdingCommit(larder, first),
      run: { _ = try larder.objects.put(bucket: "k", name: "same", staged: again) }, watch: Self.waits)
    #expect(!ranBeside, "a commit of the same content ran beside an open one (no content key?)")
    #expect(try larder.storeCounts() == [1, 2, 1])

    let bytes = Self.content(seed: 4)
    let digest = Digest.hash(.sha256, bytes)
    let uploads = (0..<16).map { i in
      Background { _ = try larder.objects.put(bucket: "k", name: "copy-\(i)", data: Data(bytes)) }
    }
    for upload in uploads {
      #expect(upload.finished(within: 60))
      try upload.value()
    }
    let (blobRows, references) = try larder.catalog.read { db in
      (
        try db.row("SELECT count(*) AS n FROM blobs WHERE sha256 = ?", [digest])?.int("n"),
        try db.row("SELECT count(*) AS n FROM files WHERE blob_sha256 = ?", [digest])?.int("n")
      )
    }
    #expect(blobRows == 1)
    #expect(references == 16)
    for i in 0..<16 { try larder.objects.delete(bucket: "k", name: "copy-\(i)") }
    let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    // The 16, and the unattached file the first part committed.
    #expect(report.filesReleased == 17)
    let left = try larder.catalog.read { db in
      try db.row("SELECT count(*) AS n FROM blobs WHERE sha256 = ?", [digest])?.int("n")
    }
    #expect(left == 0)
    if !TestBlobs.isS3 {
      #expect(!FileManager.default.fileExists(atPath: larder.blobs.path(for: digest)))
    }
  }

  /// A writer deduping against an orphaned blob holds its content key: the collector's
  /// deleting batch (keyed by its candidates) waits, then finds the new reference and keeps the
  /// blob. (The batch is called directly: gc's earlier phases are unkeyed writes, which would
  /// wait for the writer anyway.)
  @Test func theCollectorWaitsForAWriterDedupingAgainstItsCandidate() throws {
    let larder = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    let bytes = Self.content(seed: 5)
    _ = try larder.objects.put(bucket: "k", name: "old", data: Data(bytes))
    try larder.objects.delete(bucket: "k", name: "old")
    // The files phase releases the orphaned file; the blob row stays for the blobs phase.
    try larder.catalog.write { db in try db.execute("DELETE FROM files") }
    let staged = try Self.stage(larder, bytes)
    let removed = Mutex<Int>(-1)
    let ranBeside = try Self.whileOpen(
      { gate in
        _ = try larder.objects.put(
          ObjectPath(bucket: "k", name: "new"), staged: staged, options: .init(), admission: nil,
          alsoIn: { _ in gate.enterAndWait() })
      },
      run: {
        let result = try larder.content.removeUnreferenced([Digest.hash(.sha256, bytes)], faults: .none)
        removed.withLock { $0 = result.blobs }
      }, watch: Self.waits)
    #expect(!ranBeside, "the collector's delete ran beside a writer deduping against its candidate")
    #expect(removed.withLock { $0 } == 0)
    let object = try larder.objects.get(bucket: "k", name: "new")
    #expect(try larder.files.data(of: object.file) == Data(bytes))
  }

  /// An unkeyed write runs alone: an open one keeps a keyed put waiting, and an open keyed
  /// commit keeps an unkeyed write waiting.
  @Test func anUnkeyedWriteExcludesKeyedOnesAndTheyExcludeIt() throws {
    let larder = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    let staged = try Self.stage(larder, seed: 6)
    let keyedRanBeside = try Self.whileOpen(
      { gate in try larder.catalog.write { _ in gate.enterAndWait() } },
      run: { _ = try larder.objects.put(bucket: "k", name: "keyed", staged: staged) }, watch: Self.waits)
    #expect(!keyedRanBeside, "a keyed put ran beside an open unkeyed write (no shared store lock?)")

    let other = try Self.stage(larder, seed: 7)
    let unkeyedRanBeside = try Self.whileOpen(
      Self.holdingCommit(larder, other),
      run: { try larder.catalog.write { db in try db.execute("DELETE FROM uploads WHERE id = 'none'") } },
      watch: Self.waits)
    #expect(!unkeyedRanBeside, "an unkeyed write ran beside an open keyed commit (store lock not exclusive?)")
  }

  /// Conditional writes to one name: while the first (`ifGenerationMatch: 0`) is inside its
  /// transaction (its admission step waits), seven more race it; afterwards 16 writers race
  /// with the generation that is current. Each time exactly one wins and the rest get
  /// `preconditionFailed` (HTTP 412).
  @Test func conditionalWritesToOneNameHaveExactlyOneWinner() throws {
    let larder = try TestStore.temporary(configuration: .init(backgroundMD5: false))
    let gate = Gate()
    let path = try ObjectPath(bucket: "k", name: "race")
    let outcomes = Mutex<(won: Int, refused: Int, other: [String])>((0, 0, []))
    @Sendable func attempt(_ seed: UInt64, generation: Int64, admission: (any ObjectAdmission)?) {
      do {
        var options = ObjectWriteOptions()
        options.ifGenerationMatch = generation
        _ = try larder.objects.put(
          path, staged: try Self.stage(larder, seed: seed), options: options, admission: admission)
        outcomes.withLock { $0.won += 1 }
      } catch LarderError.preconditionFailed {
        outcomes.withLock { $0.refused += 1 }
      } catch {
        outcomes.withLock { $0.other.append("\(error)") }
      }
    }
    let first = Background { attempt(100, generation: 0, admission: WaitingAdmission(gate: gate)) }
    #expect(gate.awaitEntered())
    let racers = (0..<7).map { i in Background { attempt(101 + UInt64(i), generation: 0, admission: nil) } }
    _ = racers.map { $0.finished(within: Self.waits / 2) }
    gate.release()
    #expect(first.finished(within: 30))
    for racer in racers { #expect(racer.finished(within: 30)) }
    var seen = outcomes.withLock { $0 }
    #expect(seen.won == 1 && seen.refused == 7 && seen.other == [], "\(seen)")

    outcomes.withLock { $0 = (0, 0, []) }
    let current = try larder.objects.get(bucket: "k", name: "race").generation
    let writers = (0..<16).map { i in
      Background { attempt(200 + UInt64(i), generation: current, admission: nil) }
    }
    for writer in writers { #expect(writer.finished(within: 60)) }
    seen = outcomes.withLock { $0 }
    #expect(seen.won == 1 && seen.refused == 15 && seen.other == [], "\(seen)")
  }

  // MARK: - helpers

  /// Runs `open` (a write whose transaction calls `gate.enterAndWait()`) on a thread of its own;
  /// once it is inside its transaction, starts `other` on another and watches it for `seconds`,
  /// runs `meanwhile`, then lets the first go and waits for both (rethrowing what either threw).
  /// Returns whether `other` finished while the first transaction was open.
  static func whileOpen(
    _ open: @escaping @Sendable (Gate) throws -> Void, run other: @escaping @Sendable () throws -> Void,
    watch seconds: Double, meanwhile: () throws -> Void = {}
  ) throws -> Bool {
    let gate = Gate()
    let holder = Background { try open(gate) }
    guard gate.awaitEntered() else { throw HarnessFailure("the first write never entered its transaction") }
    let second = Background(other)
    let ranBeside = second.finished(within: seconds)
    try meanwhile()
    gate.release()
    #expect(holder.finished(within: 60) && second.finished(within: 60))
    try holder.value()
    try second.value()
    return ranBeside
  }

  /// A commit of `staged` (no object) that waits inside its transaction for the gate.
  static func holdingCommit(_ larder: Larder, _ staged: StagedBlob) -> @Sendable (Gate) throws -> Void {
    { gate in
      _ = try larder.files.commit(staged) { _, file in
        gate.enterAndWait()
        return file
      }
    }
  }

  static func content(seed: UInt64) -> [UInt8] {
    var random = PseudoRandomBytes(seed: seed)
    return random.bytes(4096 + Int(seed % 97))
  }

  static func stage(_ larder: Larder, seed: UInt64) throws -> StagedBlob {
    try stage(larder, content(seed: seed))
  }

  static func stage(_ larder: Larder, _ bytes: [UInt8]) throws -> StagedBlob {
    let writer = try larder.files.makeWriter()
    try writer.write(Data(bytes))
    return try writer.finish()
  }
}

/// One transaction's body waiting inside it until the test lets it go.
final class Gate: Sendable {
  private let entered = DispatchSemaphore(value: 0)
  private let released = DispatchSemaphore(value: 0)

  /// Called from inside the transaction: says so, then waits (at most 30 s, so a failing test
  /// never hangs; PostgreSQL's own idle-in-transaction limit is 60 s).
  func enterAndWait() {
    entered.signal()
    _ = released.wait(timeout: .now() + 30)
  }

  func awaitEntered() -> Bool { entered.wait(timeout: .now() + 30) == .success }

  func release() { released.signal() }
}

/// An admission step that waits inside the write (the first put of the race).
struct WaitingAdmission: ObjectAdmission {
  let gate: Gate
  func admit(_ incoming: IncomingObject, replacing current: StoredObject?) throws { gate.enterAndWait() }
}

/// Work on a thread of its own, watched from the test.
final class Background: @unchecked Sendable {
  private let done = DispatchSemaphore(value: 0)
  private let outcome = Mutex<Result<Void, any Error>?>(nil)

  init(_ work: @escaping @Sendable () throws -> Void) {
    let thread = Thread { [self] in
      let result = Result { try work() }
      outcome.withLock { $0 = result }
      done.signal()
    }
    thread.start()
  }

  /// Whether the work returned within `seconds` (true from then on).
  func finished(within seconds: Double) -> Bool {
    if outcome.withLock({ $0 != nil }) { return true }
    guard done.wait(timeout: .now() + seconds) == .success else { return false }
    done.signal()
    return true
  }

  /// Rethrows what the work threw.
  func value() throws { try outcome.withLock { $0 }?.get() }
}
