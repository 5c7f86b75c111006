import Foundation
import Synchronization

/// A bounded pool of render threads with a bounded queue, and one render per key at a time.
///
/// ```swift
/// let pool = RenderPool(threads: 2, queueLength: 16)
/// let bytes = try pool.run(key: "abc…;w=64") { try render() }   // waits; never renders here
/// ```
/// Work runs on the pool's own threads, never on the caller's: the caller (an HTTP connection
/// thread) waits for the result. A caller asking for a key already being rendered waits for that
/// render instead of starting another, so concurrent identical requests render once. When the
/// queue is full, ``run(key:_:)`` throws ``ImageError/busy`` at once (the server's 503).
public final class RenderPool: Sendable {
  /// One render, and whoever waits for it.
  private final class Flight: @unchecked Sendable {
    // `result` is written once, before `done.leave()`, and read only after `done.wait()`.
    let done = DispatchGroup()
    var result: Result<any Sendable, any Error> = .failure(ImageError.busy)
    let work: @Sendable () throws -> any Sendable
    init(work: @escaping @Sendable () throws -> any Sendable) {
      self.work = work
      done.enter()
    }
  }

  private struct State {
    var queue: [(key: String, flight: Flight)] = []
    var inFlight: [String: Flight] = [:]
    /// Renders started since the pool began (tests read it through ``rendersStarted``).
    var started = 0
  }

  public let threads: Int
  public let queueLength: Int
  private let state = Mutex(State())
  private let wake = DispatchSemaphore(value: 0)

  /// The process's default pool (the library API's): as many threads as cores, 64 queued.
  public static let shared = RenderPool(
    threads: ProcessInfo.processInfo.activeProcessorCount, queueLength: 64)

  public init(threads: Int, queueLength: Int) {
    self.threads = max(1, threads)
    self.queueLength = max(0, queueLength)
    for i in 0..<self.threads {
      let thread = Thread { [self] in self.serve() }
      thread.name = "larder-render-\(i)"
      // libvips works on tiles in its own threads too; these only drive it.
      thread.stackSize = 8 << 20
      thread.start()
    }
  }

  /// How many renders have started: a render joined by a second caller counts once.
  public var rendersStarted: Int { state.withLock { $0.started } }
  /// Renders queued or running now.
  public var pending: Int { state.withLock { $0.inFlight.count } }

  /// The result of `work` for `key`, run on a pool thread; joins a render of `key` in progress.
  /// - Throws: ``ImageError/busy`` when the queue is full; else what `work` threw.
  public func run<T: Sendable>(key: String, _ work: @escaping @Sendable () throws -> T) throws -> T {
    let flight = try state.withLock { state throws(ImageError) -> Flight in
      if let existing = state.inFlight[key] { return existing }
      // Every thread busy and the queue full.
      guard state.inFlight.count < threads + queueLength else { throw .busy }
      let flight = Flight(work: { try work() })
      state.inFlight[key] = flight
      state.queue.append((key, flight))
      return flight
    }
    wake.signal()
    flight.done.wait()
    return try flight.result.get() as! T
  }

  private func serve() {
    while true {
      wake.wait()
      guard
        let (key, flight) = state.withLock({ state -> (String, Flight)? in
          guard !state.queue.isEmpty else { return nil }
          state.started += 1
          return state.queue.removeFirst()
        })
      else { continue }
      flight.result = Result { try flight.work() }
      _ = state.withLock { $0.inFlight.removeValue(forKey: key) }
      flight.done.leave()
    }
  }
}
