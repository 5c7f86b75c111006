import Dispatch
import Foundation

/// A catalog lease this process holds on an upload (shared mode, ARCHITECTURE.md, "Resumable
/// uploads across nodes").
package struct HeldLease: Sendable, Equatable {
  /// Random per claim: what every commit of this append names in `lease_holder`.
  package var token: String
  /// The row's `lease_epoch` when claimed: it moves on every takeover of a lease that was not
  /// given back cleanly, and spaces the part numbers (``SharedUploadState/nextPartNumber(epoch:)``).
  package var epoch: Int64
  /// A store call of this append failed midway (a part may still land): the release then moves
  /// the epoch too, so the next holder numbers its parts past any this one may have sent.
  package var dirty = false
}

extension Duration {
  /// Whole milliseconds, the catalog's unit for dates.
  var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
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
