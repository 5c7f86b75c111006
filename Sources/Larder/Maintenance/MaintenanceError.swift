import Foundation

/// Why a maintenance run (collection, verification) could not start or go on.
public enum MaintenanceError: Error, Sendable, Equatable, CustomStringConvertible {
  /// Another collector or verifier holds `<data>/gc.lock` (in this process or another).
  case collectorBusy(lockPath: String)

  /// A stable machine-readable code.
  public var code: String {
    switch self {
    case .collectorBusy: "collector-busy"
    }
  }

  public var description: String {
    switch self {
    case .collectorBusy(let path):
      "another garbage collection or verification is running on this data directory (\(path) is locked)"
    }
  }
}
