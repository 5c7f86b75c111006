import Foundation

/// A named point in a multi-step write where tests can inject a failure or a crash.
package enum FaultPoint: String, Sendable, CaseIterable {
  case afterStage = "after-stage"
  case afterLink = "after-link"
  case beforeCommit = "before-commit"
  /// The write transaction's `COMMIT` itself: an injector made with a commit breaker makes it
  /// fail for real there, after everything in the transaction succeeded (what a full or
  /// failing disk does at COMMIT).
  case commit = "commit"
  case afterCommit = "after-commit"
  case gcAfterTrash = "gc-after-trash"
  case gcAfterCommit = "gc-after-commit"
  case gcMidBatch = "gc-mid-batch"
  /// Half of a backup's blobs copied, no manifest yet.
  case backupMidCopy = "backup-mid-copy"
}

/// Calls a test's closure at each ``FaultPoint``; the default, ``none``, does nothing.
///
/// Not part of the public API: tests (and the test-only build of the CLI, `larder-crashing`,
/// which exits abruptly at a point its environment names) pass one to the package `init`s of
/// ``Larder/Configuration``, `LarderService.Options` and `LarderCLI.main(faults:)`; production
/// code never makes one, and never from the environment.
/// ```swift
/// let faults = FaultInjector { if $0 == .beforeCommit { throw InjectedFailure() } }
/// let larder = try Larder(at: dir, configuration: .init(faults: faults))
/// ```
package struct FaultInjector: Sendable {
  private let body: @Sendable (FaultPoint) throws -> Void
  /// What a test does, inside the write transaction, so that its COMMIT fails once `body` threw
  /// at ``FaultPoint/commit`` (given the connection and the new file's id); nil: the error
  /// `body` threw fails the transaction's body instead.
  private let commitBreaker: (@Sendable (any Database, _ fileID: String) throws -> Void)?

  package init(_ body: @escaping @Sendable (FaultPoint) throws -> Void) {
    self.body = body
    commitBreaker = nil
  }

  package init(
    _ body: @escaping @Sendable (FaultPoint) throws -> Void,
    breakingCommit: @escaping @Sendable (any Database, _ fileID: String) throws -> Void
  ) {
    self.body = body
    commitBreaker = breakingCommit
  }

  package static let none = FaultInjector { _ in }

  package func hit(_ point: FaultPoint) throws { try body(point) }

  /// ``FaultPoint/commit`` in the write transaction that inserted file `fileID`.
  package func hitCommit(_ db: any Database, fileID: String) throws {
    do { try body(.commit) } catch {
      guard let commitBreaker else { throw error }
      try commitBreaker(db, fileID)
    }
  }
}
