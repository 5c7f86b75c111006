import Foundation
import Larder
import LarderCLI

// `larder`, for crash tests only: `LARDER_CRASH_AT=<point>` makes the process exit abruptly
// (`_exit(86)`: no cleanup, as a power cut leaves everything not yet fsync'ed) when the write
// path or the collector reaches that ``FaultPoint``. The real `larder` reads no such variable.
let point = ProcessInfo.processInfo.environment["LARDER_CRASH_AT"].flatMap(FaultPoint.init(rawValue:))
let faults = point.map { point in FaultInjector { hit in if hit == point { _exit(86) } } } ?? .none
signal(SIGPIPE, SIG_IGN)
exit(LarderCLI.main(faults: faults))
