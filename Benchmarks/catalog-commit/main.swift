import Foundation
import Larder
import LarderPostgres

// Commits per second of 4 KiB uploads through the library (distinct contents, one
// `objects.put` each, serially), on the SQLite catalog and, given a PostgreSQL URL, on a fresh
// schema of it; CPU per commit beside. A measurement, never a test: Benchmarks/catalog-commit/run.sh.
//
//   larder-commit-bench DIR [postgres://user@host:port/db] [COUNT=400]

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
  FileHandle.standardError.write(Data("usage: larder-commit-bench DIR [POSTGRES_URL] [COUNT]\n".utf8))
  exit(2)
}
let root = URL(fileURLWithPath: arguments[1])
let postgres = arguments.count > 2 && !arguments[2].isEmpty ? arguments[2] : nil
let count = arguments.count > 3 ? Int(arguments[3]) ?? 400 : 400

func cpuSeconds() -> Double {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
    + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func measure(_ label: String, at directory: URL, catalog: CatalogLocation) throws {
  let larder = try Larder(
    at: directory, configuration: .init(backgroundMD5: false, catalog: catalog, backends: [.postgres]))
  var generator = SystemRandomNumberGenerator()
  let bodies = (0..<count).map { _ in Data((0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }) }
  let cpuStart = cpuSeconds()
  let start = Date()
  for (i, body) in bodies.enumerated() {
    _ = try larder.objects.put(bucket: "bench", name: "o\(i)", data: body)
  }
  let wall = Date().timeIntervalSince(start)
  let cpu = cpuSeconds() - cpuStart
  print(
    "commit-bench \(label): \(count) uploads of 4 KiB in \(String(format: "%.2f", wall)) s = "
      + "\(String(format: "%.0f", Double(count) / wall)) commits/s; "
      + "CPU \(String(format: "%.0f", cpu / Double(count) * 1e6)) µs/commit")
  let stats = try larder.statistics()
  guard stats.objectCount == count, stats.fileCount == count, stats.blobCount == count else {
    FileHandle.standardError.write(
      Data("commit-bench \(label): expected \(count) objects, files and blobs, found \(stats)\n".utf8))
    exit(1)
  }
}

do {
  try measure("sqlite", at: root.appendingPathComponent("sqlite"), catalog: .dataDirectory)
  if let postgres {
    let schema = "bench_" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
    try measure(
      "postgres", at: root.appendingPathComponent("pg"),
      catalog: CatalogLocation(parsing: postgres + (postgres.contains("?") ? "&" : "?") + "schema=" + schema))
  }
} catch {
  FileHandle.standardError.write(Data("commit-bench: \(error)\n".utf8))
  exit(1)
}
