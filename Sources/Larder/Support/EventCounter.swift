import Synchronization

/// A count of events since the process opened the store, shared by every copy of the value
/// that holds it (for `/metrics`).
final class EventCounter: Sendable {
  private let count = Atomic<Int>(0)

  func add(_ n: Int = 1) { count.add(n, ordering: .relaxed) }

  var value: Int { count.load(ordering: .relaxed) }
}
