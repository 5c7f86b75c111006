import Synchronization

/// A bounded, shared cache of compiled patterns: rules run on every request and usually
/// use a handful of fixed patterns, so compiling each time would waste most of the work.
final class RegexCache: Sendable {
  static let shared = RegexCache(capacity: 256)

  private struct State {
    var entries: [String: Result<RE2Pattern, RegexError>] = [:]
    /// Insertion order, for evicting the oldest entry.
    var order: [String] = []
  }

  private let capacity: Int
  private let state = Mutex(State())
  /// Patterns longer than this are compiled but not cached, so the cache stays small.
  private static let maxCachedPatternBytes = 4096

  init(capacity: Int) { self.capacity = capacity }

  func pattern(_ source: String) throws(RegexError) -> RE2Pattern {
    if let hit = state.withLock({ $0.entries[source] }) { return try hit.get() }
    let result: Result<RE2Pattern, RegexError>
    do { result = .success(try RE2Pattern(source)) } catch { result = .failure(error) }
    if source.utf8.count <= RegexCache.maxCachedPatternBytes {
      state.withLock { state in
        guard state.entries[source] == nil else { return }
        if state.order.count >= capacity {
          let oldest = state.order.removeFirst()
          state.entries[oldest] = nil
        }
        state.entries[source] = result
        state.order.append(source)
      }
    }
    return try result.get()
  }

  var count: Int { state.withLock { $0.entries.count } }
}
