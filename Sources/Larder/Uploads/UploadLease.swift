import Dispatch
import Foundation

/// A catalog lease this process holds on an upload (shared mode, ARCHITECTURE.md, "Resumable
/// uploads across nodes").
struct HeldLease: Sendable, Equatable {
  /// Random per claim: what every commit of this append names in `lease_holder`.
  var token: String
  /// The row's `lease_epoch` when claimed: it moves on every takeover of a lease that was not
  /// given back cleanly, and spaces the part numbers (``SharedUploadState/nextPartNumber(epoch:)``).
  var epoch: Int64
  /// A store call of this append failed midway (a part may still land): the release then moves
  /// the epoch too, so the next holder numbers its parts past any this one may have sent.
  var dirty = false
}

extension Duration {
  /// Whole milliseconds, the catalog's unit for dates.
  var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}

/// What tests change about one ``UploadStore`` to make its node misbehave on cue; production
/// uses the defaults. An explicit value passed by tests, never read from the environment.
struct UploadStoreTestHooks: Sendable {
  /// Added to this node's clock (``UploadStore/now``): a node whose clock is wrong.
  var clockSkew: Duration = .zero
  /// Stands in for the Larder's shared storage (a store that stalls or misbehaves on cue).
  var storage: (any SharedUploadStorage)?
  /// Called on the renewal timer's thread before each renewal while a store call runs: blocking
  /// here stops renewals as a stopped process would.
  var beforeRenewal: (@Sendable () -> Void)?

  init(
    clockSkew: Duration = .zero, storage: (any SharedUploadStorage)? = nil,
    beforeRenewal: (@Sendable () -> Void)? = nil
  ) {
    self.clockSkew = clockSkew
    self.storage = storage
    self.beforeRenewal = beforeRenewal
  }
}

/// Renews a lease on a timer while a long store call (a part, an assembly, a copy) runs on the
/// caller's thread, so that a slow transfer does not lose its lease: renewal in `write()` and
/// at commits alone left a part of a few hundred MiB to outlive it. A process that is stopped
/// (SIGSTOP, a long pause) stops its timer too, so its lease runs out as it should.
final class LeaseRenewer {
  private let timer: any DispatchSourceTimer

  init(every interval: Duration, renew: @escaping @Sendable () throws -> Void) {
    timer = DispatchSource.makeTimerSource(queue: .global())
    timer.schedule(deadline: .now() + interval.timeInterval, repeating: interval.timeInterval)
    timer.setEventHandler {
      // A failure means another node holds the lease now: the commit that follows the call is
      // refused. Later ticks fail the same way, one small UPDATE each, until the call ends.
      try? renew()
    }
    timer.resume()
  }

  func stop() { timer.cancel() }
}
