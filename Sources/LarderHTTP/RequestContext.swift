import Foundation

/// One request's state from its head to its end: what metrics and the access log record.
/// The connection's loop and the worker holding the connection touch it one at a time, so no
/// lock is needed.
final class RequestContext {
  let rawTarget: String
  let started = ContinuousClock.now
  let wallClockStart = Date().timeIntervalSince1970
  var method = ""
  var request: HTTPRequest?
  var routeLabel: String?
  var sink: (any HTTPBodySink)?
  /// `finish()` or `cancel()` has been called on `sink`.
  var sinkSettled = false
  var status = 0
  var bytesIn: Int64 = 0
  var bytesOut: Int64 = 0
  /// Metrics and the access log have it; it is not counted in flight any more.
  var ended = false

  init(rawTarget: String) { self.rawTarget = rawTarget }
}

extension RequestContext {
  /// Records the request's end in the metrics and the access log; `outcome` is `ok`,
  /// `timeout`, `shutdown`, `client_abort` or `error`. Only a
  /// completed response counts its bytes out.
  func record(outcome: String, metrics: Metrics, accessLog: AccessLog, remote: () -> String) {
    let bytesOut = outcome == "ok" ? self.bytesOut : 0
    let elapsed = ContinuousClock.now - started
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let route = routeLabel ?? "unmatched"
    metrics.recordRequest(route: route, status: status, bytesIn: bytesIn, bytesOut: bytesOut, seconds: seconds)
    guard accessLog.isEnabled else { return }
    let path = request.map { String($0.path) } ?? String(rawTarget.prefix { $0 != "?" })
    accessLog.record(
      AccessLogEntry(
        time: wallClockStart, requestID: request?.id ?? "", method: method, path: path, route: route,
        status: status, bytesIn: bytesIn, bytesOut: bytesOut, durationMilliseconds: seconds * 1000,
        remote: request?.remoteAddress ?? remote(), outcome: outcome))
  }
}
