import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// Commits per second of 4 KiB uploads (distinct contents, one `objects.put` each, serially),
/// on the SQLite catalog and on the PostgreSQL one named by `LARDER_COMMIT_BENCH_PG`; a
/// benchmark, skipped unless asked for (docs/ARCHITECTURE.md quotes its numbers).
///
/// ```
/// LARDER_COMMIT_BENCH=1 LARDER_COMMIT_BENCH_PG=postgresql://postgres@127.0.0.1:15499/postgres \
///   swift test --filter CatalogCommitBenchmark
/// ```
@Suite struct CatalogCommitBenchmark {
  static let enabled = ProcessInfo.processInfo.environment["LARDER_COMMIT_BENCH"] != nil
  static let postgres = ProcessInfo.processInfo.environment["LARDER_COMMIT_BENCH_PG"]

  @Test(.enabled(if: enabled)) func fourKiBUploads() throws {
    let scratch = try StoreScratch()
    try measure("sqlite", at: scratch.url.appendingPathComponent("sqlite"), catalog: .dataDirectory)
    if let postgres = Self.postgres {
      let schema = "bench_" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
      try measure(
        "postgres", at: scratch.url.appendingPathComponent("pg"),
        catalog: CatalogLocation(parsing: postgres + (postgres.contains("?") ? "&" : "?") + "schema=" + schema))
    }
  }

  private func measure(_ label: String, at directory: URL, catalog: CatalogLocation) throws {
    let larder = try TestStore.open(at: directory, configuration: .init(backgroundMD5: false, catalog: catalog))
    var random = PseudoRandomBytes(seed: 42)
    let count = 400
    let bodies = (0..<count).map { _ in Data(random.bytes(4096)) }
    let cpuStart = Self.cpuSeconds()
    let start = Date()
    for (i, body) in bodies.enumerated() {
      _ = try larder.objects.put(bucket: "bench", name: "o\(i)", data: body)
    }
    let wall = Date().timeIntervalSince(start)
    let cpu = Self.cpuSeconds() - cpuStart
    print(
      "commit-bench \(label): \(count) uploads of 4 KiB in \(String(format: "%.2f", wall)) s = "
        + "\(String(format: "%.0f", Double(count) / wall)) commits/s; CPU \(String(format: "%.0f", cpu / Double(count) * 1e6)) µs/commit"
    )
    #expect(try larder.storeCounts() == [Int64(count), Int64(count), Int64(count)])
  }

  static func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
      + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
  }
}
