import Foundation
import Synchronization

/// A descriptor a response body owns until it is handed over: to the engine (which closes it
/// once the body is sent or the connection ends) or to a test driver that reads it. A body never handed over
/// (the client went away) closes it when released. Shared by ``HTTPFileBody`` and
/// ``HTTPStreamBody``.
final class HandedOverDescriptor: Sendable {
  private let descriptor: Mutex<Int32?>

  init(_ fd: Int32) { descriptor = Mutex(fd) }

  /// The descriptor, once; afterwards this object no longer closes it. Nil when taken already.
  func take() -> Int32? {
    descriptor.withLock { d in
      defer { d = nil }
      return d
    }
  }

  deinit {
    if let fd = descriptor.withLock({ $0 }) { close(fd) }
  }
}
