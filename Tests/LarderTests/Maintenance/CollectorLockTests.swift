import Foundation
import LarderTestSupport
import Testing

@testable import Larder

/// Verification and collection exclude each other through one lock file, created on demand.
@Suite struct CollectorLockTests {
  @Test func plainVerifyTakesTheCollectorLockEvenOnAFreshStore() throws {
    let dir = ScratchDirectory("verify-lock")
    let larder = try TestStore.open(at: dir.url)
    let lockPath = CollectorLock.path(in: larder.directory)
    #expect(!FileManager.default.fileExists(atPath: lockPath))
    _ = try Verifier(larder: larder).verify()
    #expect(FileManager.default.fileExists(atPath: lockPath))
    // A verification holding it refuses a collection, and the reverse.
    let held = try CollectorLock.acquire(in: larder.directory)
    #expect(throws: MaintenanceError.collectorBusy(lockPath: lockPath)) {
      _ = try Verifier(larder: larder).verify()
    }
    held?.release()
  }
}
