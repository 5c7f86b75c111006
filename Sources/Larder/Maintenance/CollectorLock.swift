import Foundation

/// The `flock` on `<data>/gc.lock` that lets one collector (or repairing verifier) run at a time.
///
/// `flock` locks belong to an open file description, so two holders in the same process exclude
/// each other exactly as two processes do. The lock is released when the value is released or
/// when the process dies, so a crashed collector never leaves it stuck.
///
/// A catalog shared by several nodes also keeps collectors apart across them, with a lock its
/// engine holds for the whole run (``CatalogEngine/lockCollectors(catalog:)``: PostgreSQL's
/// session-level advisory lock, released by the server when a crashed node's session ends).
/// ```swift
/// let lock = try CollectorLock.acquire(in: larder.directory, catalog: catalog)   // throws .collectorBusy
/// defer { lock?.release() }
/// ```
final class CollectorLock: @unchecked Sendable {
  let path: String
  private var fd: Int32
  /// The catalog's lock across nodes, where the engine has one.
  private var session: (any CatalogSessionLock)?

  private init(path: String, fd: Int32) {
    self.path = path
    self.fd = fd
  }

  deinit { release() }

  static func path(in directory: URL) -> String { directory.appendingPathComponent("gc.lock").path }

  /// Takes the lock without waiting.
  ///
  /// With `create: false` a missing lock file is not created (a dry run must not change the
  /// directory) and `nil` is returned: no collector has ever run there.
  /// - Throws: ``MaintenanceError/collectorBusy(lockPath:)`` when someone else holds it.
  static func acquire(in directory: URL, create: Bool = true, catalog: Catalog? = nil) throws -> CollectorLock? {
    let local = try acquireFile(in: directory, create: create)
    guard let catalog, let session = try catalog.engine.lockCollectors(catalog: catalog) else { return local }
    let lock = local ?? CollectorLock(path: path(in: directory), fd: -1)
    lock.session = session
    return lock
  }

  private static func acquireFile(in directory: URL, create: Bool) throws -> CollectorLock? {
    let path = path(in: directory)
    let flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0)
    let fd: Int32
    do {
      fd = try POSIX.open(path, flags, mode: 0o644)
    } catch LarderError.io(_, _, ENOENT) where !create {
      return nil
    }
    if !POSIX.tryLock(fd) {
      let code = errno
      POSIX.close(fd)
      if code == EWOULDBLOCK { throw MaintenanceError.collectorBusy(lockPath: path) }
      throw LarderError.posix("flock", path, code)
    }
    return CollectorLock(path: path, fd: fd)
  }

  func release() {
    session?.release()
    session = nil
    guard fd >= 0 else { return }
    POSIX.unlock(fd)
    POSIX.close(fd)
    fd = -1
  }
}
