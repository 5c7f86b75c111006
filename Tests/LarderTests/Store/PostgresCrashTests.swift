import Dispatch
import Foundation
import LarderTestSupport
import Synchronization
import Testing

@testable import Larder

/// PostgreSQL stopped with `pg_ctl stop -m immediate` (no checkpoint: what a power cut leaves)
/// while uploads run, on a server of its own with `fsync=on`, then restarted. Runs in `make
/// test`'s PostgreSQL pass, which guarantees the server binaries.
@Suite(.enabled(if: TestCatalog.isPostgres, "needs PostgreSQL (make test's PostgreSQL pass)"))
struct PostgresCrashTests {
  static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("scripts/pg.sh").path

  /// Runs `scripts/pg.sh ARGUMENTS` through the shell; returns what it printed.
  @discardableResult
  static func pg(_ arguments: [String], fsync: Bool = false) throws -> String {
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("pg-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: output) }
    let command = (fsync ? "FSYNC=on " : "") + ([script] + arguments).map { "'\($0)'" }.joined(separator: " ")
    guard system(command + " > '\(output)'") == 0 else {
      throw LarderError.invalidArgument("pg.sh \(arguments) failed")
    }
    return (try String(contentsOfFile: output, encoding: .utf8)).trimmingCharacters(in: .whitespacesAndNewlines)
  }

  @Test func everyAcknowledgedUploadSurvivesAnImmediateStopAndRestart() throws {
    let dir = "/tmp/larder-crash-pg-\(UUID().uuidString.prefix(8))"
    let port = String(Int.random(in: 20_000...29_999))
    let url = try Self.pg(["start", dir, port], fsync: true)
    defer { _ = try? Self.pg(["stop", dir]) }
    let scratch = try StoreScratch()
    let larder = try TestStore.open(
      at: scratch.url.appendingPathComponent("data"),
      configuration: .init(backgroundMD5: false, catalog: CatalogLocation(parsing: url + "?schema=crash")))

    let acknowledged = Mutex<[(String, Data)]>([])
    let failures = Mutex<[DatabaseError]>([])
    let others = Mutex<[String]>([])
    let stop = Atomic<Bool>(false)
    let group = DispatchGroup()
    for writer in 0..<2 {
      DispatchQueue.global().async(group: group) {
        var random = PseudoRandomBytes(seed: 7_000 + UInt64(writer))
        var i = 0
        while !stop.load(ordering: .relaxed) {
          let name = "w\(writer)-\(i)"
          let data = Data(random.bytes(4096))
          do {
            _ = try larder.objects.put(bucket: "b", name: name, data: data)
            acknowledged.withLock { $0.append((name, data)) }
          } catch let error as DatabaseError {
            failures.withLock { $0.append(error) }
            usleep(20_000)
          } catch {
            others.withLock { $0.append("\(error)") }
          }
          i += 1
        }
      }
    }
    while acknowledged.withLock({ $0.count }) < 30 { usleep(10_000) }
    try Self.pg(["crash", dir])
    usleep(300_000)
    try Self.pg(["restart", dir])
    let atRestart = acknowledged.withLock { $0.count }
    // Writes resume on their own once the server is back.
    while acknowledged.withLock({ $0.count }) < atRestart + 10 { usleep(10_000) }
    stop.store(true, ordering: .relaxed)
    group.wait()

    #expect(others.withLock { $0 } == [])
    let lost = failures.withLock { $0 }
    #expect(!lost.isEmpty, "some writes must have met the outage")
    #expect(lost.allSatisfy { $0.isConnectionLost }, "\(lost.filter { !$0.isConnectionLost })")
    // Every acknowledged upload is there, byte for byte, after the restart.
    for (name, data) in acknowledged.withLock({ $0 }) {
      let object = try larder.objects.get(bucket: "b", name: name)
      #expect(try larder.files.data(of: object.file) == data, "\(name)")
    }
    // Nothing half-visible: every row has its bytes; the only leftovers are blob files of writes
    // that failed, which the collector reclaims.
    let objects = try larder.storeRowCount("objects")
    #expect(objects >= Int64(acknowledged.withLock { $0.count }))
    let report = try Verifier(larder: larder).verify()
    #expect(report.findings.allSatisfy { $0.kind == .strayBlobFile && $0.reclaimable }, "\(report.findings)")
    _ = try GarbageCollector(larder: larder).collect(options: .init(grace: .zero))
    #expect(try Verifier(larder: larder).verify().findings.isEmpty)
    #expect(try larder.storeCounts() == [objects, objects, objects])
  }
}
