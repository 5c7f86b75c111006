import Foundation
import Larder
import Synchronization

/// Feed requests waiting for their first event (`GET /admin/v1/events?wait=N`), held by no
/// request thread: one watcher thread, running only while some request waits, wakes after
/// commits (``EventCommitWatch``: the SQLite commit stamp, PostgreSQL's `LISTEN`, and a poll
/// floor) and at the earliest deadline, reads each waiting cursor's page once, and answers
/// those with events and those whose wait is over.
///
/// ```swift
/// let id = poll.add(after: cursor, limit: 100, deadline: .now + .seconds(30)) { page in … }
/// ```
final class FeedLongPoll: Sendable {
  typealias Page = (events: [ObjectEvent], next: ObjectEventCursor)
  typealias Answer = @Sendable (Result<Page, any Error>) -> Void

  private struct Waiter {
    let cursor: ObjectEventCursor
    let limit: Int
    let deadline: ContinuousClock.Instant
    let answer: Answer
  }

  private struct State {
    var waiters: [Int: Waiter] = [:]
    var nextID = 0
    var watching = false
  }

  private let events: ObjectEvents
  private let state = Mutex(State())

  init(events: ObjectEvents) {
    self.events = events
  }

  /// Requests waiting now (for tests and metrics).
  var waiting: Int { state.withLock { $0.waiters.count } }

  /// Waits for events after `cursor` until `deadline`; `answer` runs once, on the watcher's
  /// thread, unless the wait is ``remove(_:)``d first. Returns the wait's id.
  func add(after cursor: ObjectEventCursor, limit: Int, deadline: ContinuousClock.Instant, answer: @escaping Answer)
    -> Int
  {
    let (id, start) = state.withLock { s -> (Int, Bool) in
      s.nextID += 1
      s.waiters[s.nextID] = Waiter(cursor: cursor, limit: limit, deadline: deadline, answer: answer)
      defer { s.watching = true }
      return (s.nextID, !s.watching)
    }
    if start {
      let thread = Thread { [self] in watch() }
      thread.name = "larder-events-feed"
      thread.start()
    }
    return id
  }

  /// Ends wait `id` unanswered; true if it was still waiting (its answer is now the caller's).
  @discardableResult
  func remove(_ id: Int) -> Bool {
    state.withLock { $0.waiters.removeValue(forKey: id) != nil }
  }

  private func watch() {
    let watch = EventCommitWatch(events: events)
    while true {
      guard
        let earliest = state.withLock({ s -> ContinuousClock.Instant? in
          guard let earliest = s.waiters.values.map(\.deadline).min() else {
            // Decided under the lock: a wait added after this starts a new watcher.
            s.watching = false
            return nil
          }
          return earliest
        })
      else { return }
      let now = ContinuousClock.now
      if earliest > now { watch.wait(timeout: min(.milliseconds(500), earliest - now)) }
      answerReady()
    }
  }

  /// Reads the page of every cursor waited on (once per cursor and limit) and answers the waits
  /// that have events, or whose deadline passed, or whose read failed.
  private func answerReady() {
    let current = state.withLock { $0.waiters }
    var pages: [PageKey: Result<Page, any Error>] = [:]
    for (id, waiter) in current.sorted(by: { $0.key < $1.key }) {
      let key = PageKey(cursor: waiter.cursor, limit: waiter.limit)
      let page = pages[key] ?? Result { try events.feed(after: waiter.cursor, limit: waiter.limit) }
      pages[key] = page
      if case .success(let found) = page, found.events.isEmpty, ContinuousClock.now < waiter.deadline { continue }
      if remove(id) { waiter.answer(page) }
    }
  }

  private struct PageKey: Hashable {
    let cursor: ObjectEventCursor
    let limit: Int
  }
}
