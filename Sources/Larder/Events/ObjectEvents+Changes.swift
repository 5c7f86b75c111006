import Foundation
import Synchronization

extension ObjectEvents {
  /// The object changes committed after `cursor`, in commit order, as they commit (from this
  /// process or any other); for an app that embeds the store. Keep each event's `cursor` to
  /// resume from it after a restart. Iteration ends when the task is cancelled.
  /// ```swift
  /// for try await event in larder.events.changes(after: saved) {
  ///   index(event.object); saved = event.cursor
  /// }
  /// ```
  /// - Throws: (from the iteration) what reading the catalog throws.
  public func changes(after cursor: ObjectEventCursor = .start) -> AsyncThrowingStream<ObjectEvent, any Error> {
    AsyncThrowingStream { continuation in
      let cancelled = Arc(Atomic<Bool>(false))
      continuation.onTermination = { _ in cancelled.value.store(true, ordering: .relaxed) }
      let thread = Thread { [self] in
        // Made before the first read, so a commit between that read and the first wait wakes it.
        let watch = EventCommitWatch(events: self)
        var cursor = cursor
        while !cancelled.value.load(ordering: .relaxed) {
          do {
            let page = try feed(after: cursor, limit: 256)
            for event in page.events { continuation.yield(event) }
            cursor = page.next
            if page.events.isEmpty { watch.wait(timeout: .milliseconds(250)) }
          } catch {
            continuation.finish(throwing: error)
            return
          }
        }
        continuation.finish()
      }
      thread.name = "larder.event-changes"
      thread.start()
    }
  }
}

/// A reference to a non-copyable value, to share it between a closure and a thread.
private final class Arc<Value: ~Copyable>: Sendable where Value: Sendable {
  let value: Value
  init(_ value: consuming Value) { self.value = value }
}
