import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// Collection on a large generated store; a benchmark, skipped unless asked for.
///
/// ```
/// python3 Benchmarks/gc-scale/generate.py /tmp/gc-scale 1000000
/// LARDER_GC_SCALE_DIR=/tmp/gc-scale swift test --filter GCScaleBenchmark
/// ```
/// Prints the report, the wall time and the process's peak resident memory (VmHWM) before and
/// after. With `LARDER_GC_SCALE_VERIFY=1` it also times a full verification afterwards.
@Suite struct GCScaleBenchmark {
  static let directory = ProcessInfo.processInfo.environment["LARDER_GC_SCALE_DIR"]

  @Test(.enabled(if: directory != nil)) func collectLargeStore() throws {
    let url = URL(fileURLWithPath: try #require(Self.directory))
    let openStart = Date()
    let larder = try TestStore.open(at: url)
    print(
      "gc-scale: opened in \(String(format: "%.1f", Date().timeIntervalSince(openStart))) s, VmHWM \(Self.peakKiB()) KiB"
    )
    let blobsBefore = try Fixture.count(larder, "blobs")
    let dry = try GarbageCollector(larder: larder).collect(
      options: .init(grace: .seconds(3600), dryRun: true))
    print("gc-scale: dry run \(String(format: "%.1f", dry.durationSeconds)) s, VmHWM \(Self.peakKiB()) KiB")
    let report = try GarbageCollector(larder: larder).collect(options: .init(grace: .seconds(3600)))
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    print("gc-scale: \(String(decoding: try encoder.encode(report), as: UTF8.self))")
    print(
      "gc-scale: blobs \(blobsBefore) -> \(try Fixture.count(larder, "blobs")), "
        + "gc \(String(format: "%.1f", report.durationSeconds)) s, VmHWM \(Self.peakKiB()) KiB")
    var expected = dry
    expected.dryRun = false
    expected.durationSeconds = report.durationSeconds
    expected.phaseSeconds = report.phaseSeconds
    #expect(report == expected)
    if ProcessInfo.processInfo.environment["LARDER_GC_SCALE_VERIFY"] == "1" {
      let verify = try Verifier(larder: larder).verify()
      print(
        "gc-scale: verify \(String(format: "%.1f", verify.durationSeconds)) s, \(verify.blobsChecked) blobs, "
          + "clean \(verify.isClean), VmHWM \(Self.peakKiB()) KiB")
      #expect(verify.isClean)
    }
  }

  /// Peak resident set size of this process, from /proc/self/status.
  static func peakKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
      return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }
    return -1
  }
}
