// Test and benchmark only: a second process on a data directory, committing models or timing
// how soon another process's commits reach an observer.
//
//   larder-model-probe write DIR COUNT INTERVAL_US     saves Ping p0…p<COUNT-1>, one commit each
//   larder-model-probe latency DIR COUNT INTERVAL_US   observes Ping, starts `write` as a child,
//                                                       prints delivery latency percentiles (JSON)
//   larder-model-probe churn DIR COUNT SEED            COUNT random commits of Keeper and Tally
//                                                       (references with cascade and nullify)
//
// The store is opened through `TestStore`, so in the PostgreSQL test pass (LARDER_TEST_CATALOG
// inherited from the test) it is the same schema the test opened for DIR.
import Foundation
import Larder
import LarderTestSupport
import Synchronization

/// The model both processes use; `sentAt` is CLOCK_MONOTONIC (system-wide) just before saving.
struct Ping: Model {
  var id: String
  var seq: Int
  var sentAt: UInt64
}

func monotonicNanoseconds() -> UInt64 {
  var ts = timespec()
  clock_gettime(CLOCK_MONOTONIC, &ts)
  return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("larder-model-probe: \(message)\n".utf8))
  exit(2)
}

let arguments = CommandLine.arguments
guard arguments.count == 5, let count = Int(arguments[3]), let interval = UInt32(arguments[4]) else {
  fail("usage: larder-model-probe write|latency DIR COUNT INTERVAL_US, or churn DIR COUNT SEED")
}
let directory = URL(fileURLWithPath: arguments[2])

switch arguments[1] {
case "write":
  let larder = try TestStore.open(at: directory)
  for seq in 0..<count {
    try larder.models.save(Ping(id: "p\(seq)", seq: seq, sentAt: monotonicNanoseconds()))
    if interval > 0 { usleep(interval) }
  }
  print("wrote \(count)")

case "latency":
  let larder = try TestStore.open(at: directory)
  // Delivery time of each ping, the first time a delivered result holds it.
  let seen = Mutex<[String: UInt64]>([:])
  let done = DispatchSemaphore(value: 0)
  let token = try larder.models.observe(Query(Ping.self)) { change in
    let now = monotonicNanoseconds()
    let finished = seen.withLock { seen -> Bool in
      for ping in change.results where seen[ping.id] == nil { seen[ping.id] = now - ping.sentAt }
      return seen.count == count
    }
    if finished { done.signal() }
  }
  let stem = NSTemporaryDirectory() + "larder-model-probe-\(getpid())"
  let writer = try Subprocess.spawn(
    URL(fileURLWithPath: arguments[0]).path, ["write", directory.path, String(count), String(interval)],
    stdoutPath: stem + ".out", stderrPath: stem + ".err")
  let status = try Subprocess.wait(writer, timeout: 600)
  guard status == 0 else {
    fail(
      "the writer exited with \(status): \((try? String(contentsOfFile: stem + ".err", encoding: .utf8)) ?? "")"
    )
  }
  guard done.wait(timeout: .now() + 30) == .success else {
    fail("only \(seen.withLock { $0.count }) of \(count) pings were delivered")
  }
  token.cancel()
  let latencies = seen.withLock { $0.values.sorted() }
  func percentile(_ p: Double) -> Double {
    Double(latencies[min(latencies.count - 1, Int((p * Double(latencies.count)).rounded(.up)) - 1)]) / 1e6
  }
  let mean = Double(latencies.reduce(0, +)) / Double(latencies.count) / 1e6
  print(
    String(
      format: "{\"commits\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f, \"mean_ms\": %.3f}",
      count,
      percentile(0.5), percentile(0.99), percentile(1.0), mean))

case "churn":
  let larder = try TestStore.open(at: directory)
  var churn = ModelChurn(seed: UInt64(interval))
  for _ in 0..<count { try churn.step(larder) }
  print("churned \(count)")

default:
  fail("unknown mode \(arguments[1])")
}
