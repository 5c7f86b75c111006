import Foundation
import Larder
import LarderHTTP
import LarderLogging
import Synchronization

/// How the server delivers object-change events to webhooks.
public struct EventDeliveryOptions: Sendable {
  /// Whether this process delivers at all (every node may: deliveries are leased).
  public var enabled = true
  /// One request's limit, connection included; longer is a failed attempt.
  public var timeout: Duration = .seconds(10)
  public var retry = EventRetryPolicy()
  /// Delivered events older than this leave the outbox.
  public var retention: Duration = .seconds(7 * 24 * 3600)
  /// How often the outbox is pruned.
  public var pruneInterval: Duration = .seconds(3600)
  /// The longest a deliverer sleeps without looking (a missed wake-up costs at most this), and
  /// how often the list of subscriptions is read again.
  public var pollInterval: Duration = .seconds(1)
  /// After a batch smaller than a claim may take, the deliverer claims again no sooner than this
  /// after the previous claim, so the events committed meanwhile share one claim (one catalog
  /// write, under the lock uploads commit through) instead of taking one each; it adds at most
  /// this to an event's delay. 20 ms: at 1,000 uploads/s a claim covers ~20 events (5 ms: ~4,
  /// and the claims cost a delivery a quarter of its CPU); the delay stays far under 100 ms.
  public var batchWindow: Duration = .milliseconds(20)
  /// A claimed delivery's lease lasts `timeout` plus this: another node takes it over only
  /// once its deliverer must have given up on it.
  public var leaseGrace: Duration = .seconds(5)
  /// How webhooks are sent (``WebhookTransport``); nil sends none: deliveries wait in the
  /// outbox for a node that has one, and the change feed still answers.
  public var transport: (any WebhookTransport)?

  public init() {}
}

/// Delivers the outbox's events to the webhook subscriptions, on threads of its own.
///
/// A coordinator thread wakes after commits (``EventCommitWatch``; at the latest every
/// `pollInterval`), keeps one worker thread per subscription, and wakes them. A worker claims
/// its subscription's due deliveries (``EventDeliveryQueue``: leased on the catalog's clock,
/// only the oldest pending event per object), POSTs each and records the answer: a 2xx marks
/// it delivered, anything else (another status, a redirect, a timeout, a refused connection)
/// schedules a retry or dead-letters it. A slow receiver holds only its own worker.
///
/// HTTP goes through the transport the program hands in (``WebhookTransport``; the `larder`
/// executable's is libcurl's): redirects are not followed, only http and https are allowed.
public final class EventDeliverer: Sendable {
  private let larder: Larder
  private let options: EventDeliveryOptions
  /// The base of the resources' `selfLink` and `mediaLink` (as objects.get builds them).
  private let base: @Sendable () -> String
  private let logger: Logger
  /// This process's name on the leases it takes.
  let owner = "node-" + UUID().uuidString.lowercased()
  private let state = Mutex(State())
  private let counters = Mutex([String: Counts]())
  /// Signalled by ``stop()``: an idle coordinator ends at once.
  private let idle = DispatchSemaphore(value: 0)

  struct State {
    var workers: [String: SubscriptionWorker] = [:]
    var stopped = false
  }

  /// Deliveries acknowledged, attempts that failed (to be retried), deliveries given up, since start.
  public struct Counts: Sendable, Equatable {
    public var delivered = 0
    public var retried = 0
    public var dead = 0
  }

  public init(larder: Larder, options: EventDeliveryOptions, logger: Logger, base: @escaping @Sendable () -> String) {
    self.larder = larder
    self.options = options
    self.logger = logger
    self.base = base
  }

  /// Per subscription id, what this process delivered since start.
  public var counts: [String: Counts] { counters.withLock { $0 } }

  public func start() {
    let thread = Thread { [self] in
      LinuxIO.nameThisThread("event-deliverer")
      coordinate()
    }
    thread.name = "larder.event-deliverer"
    thread.start()
  }

  /// Stops the threads after the request each is in, and gives back the leases of what they
  /// claimed but did not send (another node or the next start sends them at once).
  public func stop() {
    let workers = state.withLock { s -> [SubscriptionWorker] in
      s.stopped = true
      return Array(s.workers.values)
    }
    idle.signal()
    for worker in workers { worker.retire() }
    for worker in workers { worker.finished.wait() }
    try? EventDeliveryQueue(events: larder.events).release(owner: owner)
  }

  private var stopped: Bool { state.withLock { $0.stopped } }

  /// The most deliveries one claim takes.
  static let batchLimit = 32

  private func coordinate() {
    // Commits are watched only while there is something to deliver: on PostgreSQL the watch
    // holds a connection of its own. Without subscriptions the coordinator just looks again
    // every `pollInterval` (or as soon as it is stopped).
    var watch: EventCommitWatch?
    var pruned = ContinuousClock.now
    var refreshed: ContinuousClock.Instant?
    var delivering = false
    while !stopped {
      // A commit only wakes the workers; the subscriptions are read again every `pollInterval`
      // (a new one starts delivering within it: its deliveries were fanned out at commit).
      if let refreshed, ContinuousClock.now - refreshed < options.pollInterval {
        wakeWorkers()
      } else {
        refreshed = .now
        do {
          delivering = try refreshWorkers()
        } catch {
          logger.warning("events: reading the subscriptions failed: \(error)")
        }
      }
      if ContinuousClock.now - pruned >= options.pruneInterval {
        pruned = .now
        do { try larder.events.prune(retention: options.retention) } catch {
          logger.warning("events: pruning the outbox failed: \(error)")
        }
      }
      if delivering {
        if watch == nil { watch = EventCommitWatch(events: larder.events) }
        watch?.wait(timeout: options.pollInterval)
      } else {
        watch = nil
        _ = idle.wait(timeout: .now() + options.pollInterval.timeInterval)
      }
    }
  }

  private func wakeWorkers() {
    for worker in state.withLock({ Array($0.workers.values) }) { worker.wake() }
  }

  /// One worker per subscription: new ones started, removed ones retired; every one woken.
  /// Returns whether there is any.
  private func refreshWorkers() throws -> Bool {
    let subscriptions = try larder.events.subscriptions()
    let ids = Set(subscriptions.map(\.id))
    let (woken, retired) = state.withLock { s -> ([SubscriptionWorker], [SubscriptionWorker]) in
      guard !s.stopped else { return ([], []) }
      var retired: [SubscriptionWorker] = []
      for (id, worker) in s.workers where !ids.contains(id) {
        retired.append(worker)
        s.workers[id] = nil
      }
      for subscription in subscriptions {
        if let worker = s.workers[subscription.id] {
          worker.subscription.withLock { $0 = subscription }
        } else {
          let worker = SubscriptionWorker(subscription: subscription)
          s.workers[subscription.id] = worker
          let thread = Thread { [self] in
            LinuxIO.nameThisThread("event-webhook")
            work(worker)
            worker.finished.signal()
          }
          thread.name = "larder.event-webhook"
          thread.start()
        }
      }
      return (Array(s.workers.values), retired)
    }
    for worker in retired { worker.retire() }
    for worker in woken { worker.wake() }
    return !woken.isEmpty
  }

  private func work(_ worker: SubscriptionWorker) {
    let queue = EventDeliveryQueue(events: larder.events)
    guard let transport = options.transport else { return }
    let http = transport.makeSender()
    let id = worker.subscription.withLock { $0.id }
    // Deliveries a 2xx acknowledged and how far the head's events are handled, recorded by the
    // next claim's write (one write per batch; a crash before it sends them again: at least once).
    var acknowledged: [EventDelivery] = []
    var head: ObjectEventCursor?
    // How far past the head the last idle claim looked (only events not for this subscription).
    var seen: EventDeliveryQueue.Looked?
    while worker.isActive {
      let batch: EventDeliveryQueue.Batch
      let claiming = ContinuousClock.now
      do {
        batch = try queue.claim(
          subscription: id, owner: owner, lease: options.timeout + options.leaseGrace, limit: Self.batchLimit,
          acknowledging: acknowledged, head: head, seen: seen)
        counters.withLock { $0[id, default: Counts()].delivered += acknowledged.count }
      } catch {
        // The leases run out and the deliveries are sent again: at least once, never lost.
        logger.warning("events: claiming deliveries of \(id) failed: \(error)")
        acknowledged = []
        head = nil
        worker.sleep(for: options.pollInterval)
        continue
      }
      acknowledged = []
      head = nil
      seen = batch.seen
      if batch.deliveries.isEmpty {
        // Events past the head that were not for this subscription: move past them, at once.
        if let end = batch.headEnd {
          head = end
          continue
        }
        let due = (try? queue.nextDue(subscription: id)) ?? nil
        worker.sleep(for: min(due ?? options.pollInterval, options.pollInterval))
        continue
      }
      // The batch stops while its leases still have `leaseGrace` to run.
      let claimed = ContinuousClock.now
      let subscription = worker.subscription.withLock { $0 }
      var sent = 0
      // Objects whose delivery from the head failed in this batch: their next events queue behind it.
      var held = Set<String>()
      for delivery in batch.deliveries {
        guard worker.isActive, ContinuousClock.now - claimed < options.timeout else { break }
        if delivery.fromHead && held.contains(delivery.objectKey) {
          do { try queue.queue(delivery) } catch {
            logger.warning("events: queueing \(delivery.event.id) to \(id) failed: \(error)")
            break  // the head stays before it: sent again after this batch
          }
        } else {
          let outcome = deliver(delivery, subscription: subscription, http: http, queue: queue)
          // A failure the catalog did not take: a row's lease runs out and it is sent again; the
          // head stays before an event of its own, which is read and sent again.
          if outcome == .unrecorded && delivery.fromHead { break }
          if outcome == .acknowledged { acknowledged.append(delivery) } else { held.insert(delivery.objectKey) }
        }
        if delivery.fromHead { head = delivery.event.cursor }
        sent += 1
      }
      if sent == batch.deliveries.count, let end = batch.headEnd { head = end }
      if sent < batch.deliveries.count {
        do { try queue.release(Array(batch.deliveries[sent...]), owner: owner) } catch {
          logger.warning("events: releasing deliveries to \(id) failed: \(error)")
        }
      }
      if batch.deliveries.count < Self.batchLimit { worker.pause(until: claiming + options.batchWindow) }
    }
    do {
      try queue.record(acknowledged: acknowledged, head: head, subscription: id, owner: owner)
      counters.withLock { $0[id, default: Counts()].delivered += acknowledged.count }
    } catch {
      logger.warning("events: recording deliveries to \(id) failed: \(error)")
    }
  }

  /// How one attempt ended.
  enum Outcome {
    /// A 2xx.
    case acknowledged
    /// Any other answer or none, recorded in the catalog (to be retried, or dead).
    case recorded
    /// A failure the catalog could not record.
    case unrecorded
  }

  /// Sends one delivery and, when it fails, records the failure (retry later, or dead).
  private func deliver(
    _ delivery: EventDelivery, subscription: EventSubscription, http: any WebhookSender, queue: EventDeliveryQueue
  ) -> Outcome {
    let failure: String
    do {
      let message = CloudEventMessage(
        event: delivery.event, resource: CloudEventMessage.resource(delivery.event, larder: larder, base: base()),
        mode: subscription.mode, key: subscription.signingKey, timestamp: Int64(Date().timeIntervalSince1970))
      let response = try http.post(
        url: subscription.url, headers: message.headers.map { "\($0.name): \($0.value)" }, body: message.body,
        timeout: options.timeout)
      if (200..<300).contains(response.status) { return .acknowledged }
      failure = "HTTP \(response.status)"
    } catch {
      failure = "\(error)"
    }
    do {
      let dead = try queue.failed(delivery, error: failure, policy: options.retry)
      counters.withLock {
        if dead { $0[subscription.id, default: Counts()].dead += 1 } else { $0[subscription.id, default: Counts()].retried += 1 }
      }
      if dead {
        logger.warning(
          "events: \(delivery.event.id) to \(subscription.id) dead-lettered after \(delivery.attempts + 1) attempts: \(failure)")
      }
      return .recorded
    } catch {
      logger.warning("events: recording a failed delivery of \(delivery.event.id) failed: \(error)")
      return .unrecorded
    }
  }
}

/// A subscription's worker thread's state: woken by the coordinator, retired when the
/// subscription goes or the deliverer stops.
final class SubscriptionWorker: Sendable {
  let subscription: Mutex<EventSubscription>
  private let condition = NSCondition()
  /// `sleeping`: in ``sleep(for:)``, the one wait a wake-up ends.
  private let flags = Mutex((woken: false, active: true, sleeping: false))
  let finished = DispatchSemaphore(value: 0)

  init(subscription: EventSubscription) { self.subscription = Mutex(subscription) }

  var isActive: Bool { flags.withLock { $0.active } }

  /// Ends a ``sleep(for:)``, now or (noted) the next one. A worker in its batch window is not
  /// signalled: the coordinator wakes it after every commit, and each signal would cost the
  /// pausing thread a futex wake-up and a context switch only to wait again.
  func wake() {
    condition.lock()
    if flags.withLock({ flags in
      flags.woken = true
      return flags.sleeping
    }) {
      condition.signal()
    }
    condition.unlock()
  }

  func retire() {
    condition.lock()
    flags.withLock {
      $0.woken = true
      $0.active = false
    }
    condition.signal()
    condition.unlock()
  }

  /// Waits until `deadline` or retirement; wake-ups do not end it.
  func pause(until deadline: ContinuousClock.Instant) {
    let wait = deadline - .now
    guard wait > .zero else { return }
    let until = Date().addingTimeInterval(wait.timeInterval)
    condition.lock()
    while isActive && condition.wait(until: until) {}
    condition.unlock()
  }

  /// Sleeps until woken or `duration` passed.
  func sleep(for duration: Duration) {
    let deadline = Date().addingTimeInterval(duration.timeInterval)
    condition.lock()
    flags.withLock { $0.sleeping = true }
    while !flags.withLock({ $0.woken }) && condition.wait(until: deadline) {}
    flags.withLock {
      $0.woken = false
      $0.sleeping = false
    }
    condition.unlock()
  }
}
