import Foundation

/// The process's open-file limit, and the connection limit it affords.
enum ResourceLimits {
  /// Descriptors kept aside for everything that is not a connection (the catalog, logs, blobs
  /// being read for a download, lingering sockets).
  static let reservedDescriptors = 128

  /// Raises the soft `RLIMIT_NOFILE` to the hard limit (the default soft limit, often 1 024,
  /// let 500 slow uploads exhaust descriptors); returns the soft limit now in force.
  @discardableResult
  static func raiseOpenFileLimit() -> Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
    if limit.rlim_cur < limit.rlim_max {
      var raised = limit
      raised.rlim_cur = limit.rlim_max
      if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
    }
    return Int(clamping: limit.rlim_cur)
  }

  /// `configured`, or less when `openFiles` cannot hold two descriptors per connection (a
  /// socket, and an upload's temporary file) beside the reserve; at least 16.
  static func connectionLimit(configured: Int, openFiles: Int) -> Int {
    let affordable = max(16, (openFiles - reservedDescriptors) / 2)
    return min(configured, affordable)
  }

  /// Sockets that may linger after a refusal at once (see `Connection.linger()`): what the
  /// descriptors left beside the connections allow, 16…512. Each holds a descriptor for up to
  /// `EpollServer.lingerTime`.
  static func lingeringLimit(openFiles: Int, connectionLimit: Int) -> Int {
    let spare = openFiles - 2 * connectionLimit - reservedDescriptors / 2
    return min(512, max(16, spare))
  }
}
