import Dispatch
import Foundation
import Synchronization

/// Keeps a live observation running; cancelling or releasing it stops delivery.
///
/// After ``cancel()`` returns no new callback starts (one already running finishes).
public final class ObservationToken: Sendable {
  private let onCancel: Mutex<(@Sendable () -> Void)?>

  init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = Mutex(onCancel) }

  public func cancel() {
    let action = onCancel.withLock { action -> (@Sendable () -> Void)? in
      defer { action = nil }
      return action
    }
    action?()
  }

  public var isCancelled: Bool { onCancel.withLock { $0 == nil } }

  deinit { cancel() }
}

/// The observers of one store, by model type, told after each commit that touched their type.
final class ObservationCenter: Sendable {
  private struct Entry {
    let type: String
    let refresh: @Sendable () -> Void
  }
  private let entries = Mutex<(next: UInt64, byID: [UInt64: Entry])>((0, [:]))

  func add(type: String, refresh: @escaping @Sendable () -> Void) -> UInt64 {
    entries.withLock { state in
      state.next += 1
      state.byID[state.next] = Entry(type: type, refresh: refresh)
      return state.next
    }
  }

  func remove(_ id: UInt64) {
    _ = entries.withLock { $0.byID.removeValue(forKey: id) }
  }

  var count: Int { entries.withLock { $0.byID.count } }

  /// The types observed now.
  var types: Set<String> { entries.withLock { Set($0.byID.values.map(\.type)) } }

  /// Called after commit, never inside a transaction; refreshes are asynchronous.
  func committed(types: Set<String>) {
    guard !types.isEmpty else { return }
    let due = entries.withLock { state in state.byID.values.filter { types.contains($0.type) }.map(\.refresh) }
    for refresh in due { refresh() }
  }
}

/// One running observation: re-runs its query on its own serial queue and diffs by id.
///
/// All reads and deliveries happen on that queue, so they are ordered; a refresh requested while
/// one is already pending is merged into it, and a refresh that finds nothing changed delivers
/// nothing.
final class QueryObserver<T: Model>: Sendable {
  private struct State {
    var last: [(id: String, body: String)]?
    var scheduled = false
    var cancelled = false
    /// Seconds before a failed refresh is tried again; 0 after a success.
    var retryDelay = 0.0
  }

  private let query: Query<T>
  private let store: ModelStore
  private let queue: DispatchQueue
  private let handler: @Sendable (ModelChange<T>) -> Void
  private let state = Mutex(State())

  init(query: Query<T>, store: ModelStore, handler: @escaping @Sendable (ModelChange<T>) -> Void) {
    self.query = query
    self.store = store
    self.handler = handler
    queue = DispatchQueue(label: "larder.observation.\(T.modelType)")
  }

  func schedule() {
    let go = state.withLock { state -> Bool in
      if state.scheduled || state.cancelled { return false }
      state.scheduled = true
      return true
    }
    if go { queue.async { self.refresh() } }
  }

  func cancel() { state.withLock { $0.cancelled = true } }

  private func refresh() {
    let previous = state.withLock { state -> [(id: String, body: String)]?? in
      state.scheduled = false
      return state.cancelled ? .none : .some(state.last)
    }
    guard let previous else { return }
    let rows: [(id: String, body: String)]
    let models: [T]
    var diff = ResultDiff()
    do {
      rows = try store.fetchRows(query)
      if let previous {
        diff = ResultDiff.between(old: previous, new: rows)
        // Unchanged results deliver nothing and cost no decoding.
        if diff.isEmpty { return }
      }
      models = try rows.map { try ModelStore.decode(T.self, id: $0.id, body: $0.body) }
    } catch is DatabaseError {
      // A failed read (a lost or refused catalog connection) delivers nothing and is tried
      // again after a pause that doubles up to a second: waiting for the next commit of the
      // type would leave the observer on a stale result for as long as none comes.
      let delay = state.withLock { state -> Double in
        state.retryDelay = min(max(state.retryDelay * 2, 0.01), 1)
        return state.retryDelay
      }
      queue.asyncAfter(deadline: .now() + delay) { self.schedule() }
      return
    } catch {
      // A body that no longer decodes (the type changed) fails the same way on every try:
      // nothing is delivered until a commit of the type changes it.
      return
    }
    state.withLock { $0.retryDelay = 0 }
    let change: ModelChange<T>
    if previous != nil {
      change = .update(
        results: models, deletions: diff.deletions, insertions: diff.insertions, modifications: diff.modifications)
    } else {
      change = .initial(models)
    }
    let deliver = state.withLock { state -> Bool in
      if state.cancelled { return false }
      state.last = rows
      return true
    }
    if deliver { handler(change) }
  }
}
