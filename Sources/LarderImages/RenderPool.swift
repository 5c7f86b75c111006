import Foundation
import Synchronization

/// A bounded pool of render threads with a bounded queue, one render per key at a time, and a
/// fair share for each client.
///
/// ```swift
/// let pool = RenderPool(threads: 2, queueLength: 16, perClient: 2)
/// let bytes = try pool.run(key: "abc…;w=64", client: "ip:10.0.0.7") { try render() }   // waits; never renders here
/// ```
/// Work runs on the pool's own threads, never on the caller's: the caller (an HTTP connection
/// thread) waits for the result. A caller asking for a key already being rendered waits for that
/// render instead of starting another, so concurrent identical requests render once. When the
/// queue is full, ``run(key:client:_:)`` throws ``ImageError/busy`` at once (the server's 503).
///
/// Fairness: a client (an identity, or an address) has at most `perClient` renders of its own
/// queued or running; one more throws ``ImageError/clientBusy`` at once (the server's 429), so
/// one client cannot fill the queue, nor hold more than that many request threads waiting.
/// Queued renders start by turns: the client with the fewest running first, then the one that
/// started one longest ago, so a client that queued many waits behind one render of each other
/// client rather than others waiting behind all of its renders. A client runs at most all the
/// threads but one at once, so another client's render starts at once, not after a long render.
public final class RenderPool: Sendable {
  /// One render, and whoever waits for it.
  private final class Flight: @unchecked Sendable {
    // `result` is written once, before `done.leave()`, and read only after `done.wait()`.
    let done = DispatchGroup()
    var result: Result<any Sendable, any Error> = .failure(ImageError.busy)
    let work: @Sendable () throws -> any Sendable
    let client: String
    init(client: String, work: @escaping @Sendable () throws -> any Sendable) {
      self.client = client
      self.work = work
      done.enter()
    }
  }

  private struct State {
    /// Each client's queued renders, in arrival order.
    var queues: [String: [(key: String, flight: Flight)]] = [:]
    /// Clients with queued renders, in the order they are served next.
    var turn: [String] = []
    var inFlight: [String: Flight] = [:]
    /// Renders each client has queued or running, and running.
    var held: [String: Int] = [:]
    var running: [String: Int] = [:]
    /// When each client holding renders last started one (a value of ``started``).
    var lastStart: [String: Int] = [:]
    /// Renders started since the pool began (tests read it through ``rendersStarted``).
    var started = 0

    /// The next render to start: the first queued of the client with the fewest renders
    /// running and, among those, the one whose last render started longest ago.
    /// A named client running `maxRunning` renders waits for one of them to end, so a render
    /// thread is always left for others.
    mutating func next(maxRunning: Int) -> (key: String, flight: Flight)? {
      func rank(_ client: String) -> (Int, Int) {
        (running[client, default: 0], lastStart[client, default: 0])
      }
      let ready = turn.indices.filter { turn[$0].isEmpty || running[turn[$0], default: 0] < maxRunning }
      guard let index = ready.min(by: { rank(turn[$0]) < rank(turn[$1]) }) else { return nil }
      let client = turn.remove(at: index)
      guard var queue = queues[client], !queue.isEmpty else { return next(maxRunning: maxRunning) }
      let job = queue.removeFirst()
      queues[client] = queue.isEmpty ? nil : queue
      if !queue.isEmpty { turn.append(client) }
      running[client, default: 0] += 1
      started += 1
      lastStart[client] = started
      return job
    }
  }

  public let threads: Int
  public let queueLength: Int
  /// Renders one client may have queued or running; nil: no bound but the queue's.
  public let perClient: Int?
  private let state = Mutex(State())
  private let wake = DispatchSemaphore(value: 0)

  /// The process's default pool (the library API's): as many threads as cores, 64 queued.
  public static let shared = RenderPool(
    threads: ProcessInfo.processInfo.activeProcessorCount, queueLength: 64)

  public init(threads: Int, queueLength: Int, perClient: Int? = nil) {
    self.threads = max(1, threads)
    self.queueLength = max(0, queueLength)
    self.perClient = perClient.map { max(1, $0) }
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

  /// The result of `work` for `key`, run on a pool thread; joins a render of `key` in progress
  /// (whoever started it). `client` names who asks (nil: the library's one anonymous caller).
  /// - Throws: ``ImageError/clientBusy`` when `client` has `perClient` renders queued or
  ///   running, ``ImageError/busy`` when the queue is full; else what `work` threw.
  public func run<T: Sendable>(key: String, client: String? = nil, _ work: @escaping @Sendable () throws -> T)
    throws -> T
  {
    let client = client ?? ""
    let flight = try state.withLock { state throws(ImageError) -> Flight in
      if let existing = state.inFlight[key] { return existing }
      if let perClient, !client.isEmpty, state.held[client, default: 0] >= perClient { throw .clientBusy }
      // Every thread busy and the queue full.
      guard state.inFlight.count < threads + queueLength else { throw .busy }
      let flight = Flight(client: client, work: { try work() })
      state.inFlight[key] = flight
      state.held[client, default: 0] += 1
      if state.queues[client] == nil { state.turn.append(client) }
      state.queues[client, default: []].append((key, flight))
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
          state.next(maxRunning: max(1, threads - 1))
        })
      else { continue }
      flight.result = Result { try flight.work() }
      let waiting = state.withLock { state -> Bool in
        state.inFlight.removeValue(forKey: key)
        for counts in [\State.held, \State.running] {
          let left = state[keyPath: counts][flight.client, default: 1] - 1
          state[keyPath: counts][flight.client] = left > 0 ? left : nil
        }
        if state.held[flight.client] == nil { state.lastStart[flight.client] = nil }
        return !state.turn.isEmpty
      }
      // A render held back by its client's running share may start now.
      if waiting { wake.signal() }
      flight.done.leave()
    }
  }
}
