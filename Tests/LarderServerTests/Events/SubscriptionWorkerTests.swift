import Foundation
import Larder
import Synchronization
import Testing

@testable import LarderServer

/// A subscription's worker is woken after every commit; only a worker that sleeps for work is
/// signalled, so one waiting out its batch window is not woken (and rescheduled) per commit.
@Suite struct SubscriptionWorkerTests {
  static func worker() throws -> SubscriptionWorker {
    SubscriptionWorker(
      subscription: try JSONDecoder().decode(
        EventSubscription.self,
        from: Data(
          #"{"id":"sub-1","url":"http://127.0.0.1:9/","bucket":"app","prefix":"","kinds":["finalized"],"mode":"binary","secret":"whsec_AAAA","createdAt":0}"#
            .utf8)))
  }

  /// The calling thread's voluntary context switches, from /proc (each futex wake-up is one).
  static func voluntarySwitches() -> Int {
    let status = (try? String(contentsOfFile: "/proc/thread-self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
    return Int(line?.split(separator: "\t").last ?? "") ?? -1
  }

  @Test func wakeUpsDuringTheBatchWindowDoNotRescheduleThePausingThread() throws {
    let worker = try Self.worker()
    let switches = Mutex<Int?>(nil)
    let done = DispatchSemaphore(value: 0)
    let paused = DispatchSemaphore(value: 0)
    Thread {
      let before = Self.voluntarySwitches()
      paused.signal()
      worker.pause(until: .now + .milliseconds(600))
      switches.withLock { $0 = Self.voluntarySwitches() - before }
      done.signal()
    }.start()
    paused.wait()
    for _ in 0..<100 {
      worker.wake()
      Thread.sleep(forTimeInterval: 0.002)
    }
    done.wait()
    let counted = try #require(switches.withLock { $0 })
    #expect(
      counted >= 0 && counted < 20, "the pausing thread was switched out \(counted) times by 100 wake-ups")
    // A wake-up during the pause is kept: the next sleep ends at once.
    let start = ContinuousClock.now
    worker.sleep(for: .seconds(5))
    #expect(ContinuousClock.now - start < .seconds(4))
  }

  @Test func aWakeUpEndsASleepAndRetirementEndsAPause() throws {
    let worker = try Self.worker()
    let slept = DispatchSemaphore(value: 0)
    Thread {
      worker.sleep(for: .seconds(30))
      slept.signal()
    }.start()
    Thread.sleep(forTimeInterval: 0.05)
    worker.wake()
    #expect(slept.wait(timeout: .now() + 10) == .success)
    let paused = DispatchSemaphore(value: 0)
    Thread {
      worker.pause(until: .now + .seconds(30))
      paused.signal()
    }.start()
    Thread.sleep(forTimeInterval: 0.05)
    worker.retire()
    #expect(paused.wait(timeout: .now() + 10) == .success)
    #expect(!worker.isActive)
  }
}
