import Foundation

/// A named point in a multi-step write where tests can inject a failure or a crash.
public enum FaultPoint: String, Sendable, CaseIterable {
  case afterStage = "after-stage"
  case afterLink = "after-link"
  case beforeCommit = "before-commit"
  /// The write transaction's `COMMIT` itself: a test's fault here makes it fail for real, after
  /// everything in the transaction succeeded (what a full or failing disk does at COMMIT).
  case commit = "commit"
  case afterCommit = "after-commit"
  case gcAfterTrash = "gc-after-trash"
  case gcAfterCommit = "gc-after-commit"
  case gcMidBatch = "gc-mid-batch"
}

/// Calls a test's closure at each ``FaultPoint``; in production it does nothing.
///
/// Setting `LARDER_CRASH_AT=<point>` in the environment makes the process exit abruptly
/// (`_exit(86)`, no cleanup, like a power cut for everything not yet fsync'ed) at that point:
/// crash tests run the real CLI that way.
public struct FaultInjector: Sendable {
  private let body: @Sendable (FaultPoint) throws -> Void

  public init(_ body: @escaping @Sendable (FaultPoint) throws -> Void) { self.body = body }

  public static let none = FaultInjector { _ in }

  /// Crashes at `LARDER_CRASH_AT` if set, else does nothing.
  public static let fromEnvironment: FaultInjector = {
    guard let name = ProcessInfo.processInfo.environment["LARDER_CRASH_AT"],
      let point = FaultPoint(rawValue: name)
    else { return .none }
    return FaultInjector { hit in if hit == point { _exit(86) } }
  }()

  public func hit(_ point: FaultPoint) throws { try body(point) }
}
