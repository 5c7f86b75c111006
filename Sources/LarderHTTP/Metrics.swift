import Foundation
import Synchronization

/// Request counters, byte counters, duration histograms and app-registered gauges,
/// rendered in the Prometheus text exposition format (version 0.0.4).
///
/// ```swift
/// let metrics = Metrics()
/// metrics.registerGauge("larder_objects", help: "Stored objects.") { Double(store.count) }
/// metrics.renderPrometheus()
/// ```
/// Route labels must be low-cardinality (route names, never paths).
public final class Metrics: Sendable {
  public static let defaultBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

  struct Histogram {
    var counts: [UInt64]  // per bucket, not cumulative; the last is +Inf
    var sum: Double = 0
    var count: UInt64 = 0

    mutating func record(bucket: Int, seconds: Double) {
      counts[bucket] += 1
      sum += seconds
      count += 1
    }
  }

  /// Gauges read together: one `values()` call per render gives all of them (one store query
  /// for several figures).
  struct GaugeGroup {
    let gauges: [(name: String, help: String)]
    let values: @Sendable () -> [Double]
  }

  /// One route's figures together, so counting a request looks its route up once (four
  /// lookups of the same string showed in small-request profiles).
  struct RouteFigures {
    var requests: [Int: UInt64] = [:]
    var bytesIn: Int64 = 0
    var bytesOut: Int64 = 0
    var durations: Histogram
  }

  /// A histogram the app keeps itself (bucket counts, not cumulative, one more than `bounds`
  /// for +Inf), one series per label value; read at every render.
  public struct HistogramSeries: Sendable {
    public var label: (name: String, value: String)?
    public var counts: [UInt64]
    public var sum: Double
    public var count: UInt64
    public init(label: (name: String, value: String)?, counts: [UInt64], sum: Double, count: UInt64) {
      self.label = label
      self.counts = counts
      self.sum = sum
      self.count = count
    }
  }

  struct HistogramGroup {
    let name: String
    let help: String
    let bounds: [Double]
    let series: @Sendable () -> [HistogramSeries]
  }

  struct State {
    var routes: [String: RouteFigures] = [:]
    var gauges: [GaugeGroup] = []
    var histograms: [HistogramGroup] = []
    var families: [Family] = []
  }

  /// Series the app keeps itself, one per label value (one unlabelled series without a label),
  /// read at every render.
  struct Family {
    let name: String
    let help: String
    let type: String
    let label: String?
    let series: @Sendable () -> [(value: String, number: Double)]
  }

  public let namespace: String
  public let buckets: [Double]
  private let state = Mutex(State())

  public init(namespace: String = "larder", buckets: [Double] = Metrics.defaultBuckets) {
    self.namespace = namespace
    self.buckets = buckets.sorted()
  }

  /// Counts one finished request. The server calls this from its completion callback.
  public func recordRequest(route: String, status: Int, bytesIn: Int64, bytesOut: Int64, seconds: Double) {
    let bucket = buckets.firstIndex { seconds <= $0 } ?? buckets.count
    state.withLock { s in
      // In place: a copy taken out and stored back would copy the bucket array every request.
      Self.count(
        &s.routes[route, default: RouteFigures(durations: Histogram(counts: Array(repeating: 0, count: buckets.count + 1)))],
        status: status, bytesIn: bytesIn, bytesOut: bytesOut, bucket: bucket, seconds: seconds)
    }
  }

  private static func count(
    _ figures: inout RouteFigures, status: Int, bytesIn: Int64, bytesOut: Int64, bucket: Int, seconds: Double
  ) {
    figures.requests[status, default: 0] += 1
    figures.bytesIn += bytesIn
    figures.bytesOut += bytesOut
    figures.durations.record(bucket: bucket, seconds: seconds)
  }

  /// Registers a gauge read at every render (e.g. stored objects, blob bytes). A second
  /// registration of the same name replaces the first.
  public func registerGauge(_ name: String, help: String, _ value: @escaping @Sendable () -> Double) {
    registerGauges([(name, help)]) { [value()] }
  }

  /// Registers gauges whose values come from one read per render, in the order of `gauges`
  /// (e.g. several counts from one store snapshot). A name registered again leaves its old group.
  public func registerGauges(
    _ gauges: [(name: String, help: String)], _ values: @escaping @Sendable () -> [Double]
  ) {
    let names = Set(gauges.map(\.name))
    state.withLock { s in
      s.gauges.removeAll { group in group.gauges.contains { names.contains($0.name) } }
      s.gauges.append(GaugeGroup(gauges: gauges, values: values))
    }
  }

  /// Registers a histogram the app keeps (e.g. the catalog's lock times), read at every render.
  /// A second registration of the same name replaces the first.
  public func registerHistogram(
    _ name: String, help: String, bounds: [Double], _ series: @escaping @Sendable () -> [HistogramSeries]
  ) {
    state.withLock { s in
      s.histograms.removeAll { $0.name == name }
      s.histograms.append(HistogramGroup(name: name, help: help, bounds: bounds, series: series))
    }
  }

  /// Registers a family of series the app keeps (refusals by kind, figures per event
  /// subscription), read at every render: one series per `(value, number)`, labelled
  /// `label=value` (one unlabelled series when `label` is nil; keep the label's values few);
  /// `type` is `gauge` or `counter`. A second registration of the same name replaces the first.
  public func registerFamily(
    _ name: String, help: String, type: String = "gauge", label: String?,
    _ series: @escaping @Sendable () -> [(value: String, number: Double)]
  ) {
    state.withLock { s in
      s.families.removeAll { $0.name == name }
      s.families.append(Family(name: name, help: help, type: type, label: label, series: series))
    }
  }

  /// The number of requests counted for `route` and `status` (for tests and health checks).
  public func requestCount(route: String, status: Int) -> UInt64 {
    state.withLock { $0.routes[route]?.requests[status] ?? 0 }
  }

  public func renderPrometheus() -> String {
    let s = state.withLock { $0 }
    let p = namespace
    var out = ""
    out += "# HELP \(p)_http_requests_total HTTP requests by route and status.\n"
    out += "# TYPE \(p)_http_requests_total counter\n"
    let routes = s.routes.keys.sorted()
    for route in routes {
      let requests = s.routes[route]!.requests
      for status in requests.keys.sorted() {
        out += "\(p)_http_requests_total{route=\(Self.label(route)),status=\"\(status)\"} \(requests[status]!)\n"
      }
    }
    out += "# HELP \(p)_http_request_body_bytes_total Request body bytes received, by route.\n"
    out += "# TYPE \(p)_http_request_body_bytes_total counter\n"
    for route in routes {
      out += "\(p)_http_request_body_bytes_total{route=\(Self.label(route))} \(s.routes[route]!.bytesIn)\n"
    }
    out += "# HELP \(p)_http_response_body_bytes_total Response body bytes sent, by route.\n"
    out += "# TYPE \(p)_http_response_body_bytes_total counter\n"
    for route in routes {
      out += "\(p)_http_response_body_bytes_total{route=\(Self.label(route))} \(s.routes[route]!.bytesOut)\n"
    }
    out += "# HELP \(p)_http_request_duration_seconds Time from request line to response completion.\n"
    out += "# TYPE \(p)_http_request_duration_seconds histogram\n"
    for route in routes {
      let h = s.routes[route]!.durations
      let l = Self.label(route)
      var cumulative: UInt64 = 0
      for (i, bound) in buckets.enumerated() {
        cumulative += h.counts[i]
        out +=
          "\(p)_http_request_duration_seconds_bucket{route=\(l),le=\"\(Self.number(bound))\"} \(cumulative)\n"
      }
      cumulative += h.counts[buckets.count]
      out += "\(p)_http_request_duration_seconds_bucket{route=\(l),le=\"+Inf\"} \(cumulative)\n"
      out += "\(p)_http_request_duration_seconds_sum{route=\(l)} \(Self.number(h.sum))\n"
      out += "\(p)_http_request_duration_seconds_count{route=\(l)} \(h.count)\n"
    }
    for group in s.histograms.sorted(by: { $0.name < $1.name }) {
      out += "# HELP \(group.name) \(group.help)\n# TYPE \(group.name) histogram\n"
      for series in group.series() {
        let label = series.label.map { "\($0.name)=\(Self.label($0.value))," } ?? ""
        let plain = series.label.map { "{\($0.name)=\(Self.label($0.value))}" } ?? ""
        var cumulative: UInt64 = 0
        for (i, bound) in group.bounds.enumerated() {
          cumulative += i < series.counts.count ? series.counts[i] : 0
          out += "\(group.name)_bucket{\(label)le=\"\(Self.number(bound))\"} \(cumulative)\n"
        }
        out += "\(group.name)_bucket{\(label)le=\"+Inf\"} \(series.count)\n"
        out += "\(group.name)_sum\(plain) \(Self.number(series.sum))\n"
        out += "\(group.name)_count\(plain) \(series.count)\n"
      }
    }
    var gauges: [(name: String, help: String, value: Double)] = []
    for group in s.gauges {
      let values = group.values()
      for (i, g) in group.gauges.enumerated() { gauges.append((g.name, g.help, i < values.count ? values[i] : 0)) }
    }
    for g in gauges.sorted(by: { $0.name < $1.name }) {
      out += "# HELP \(g.name) \(g.help)\n# TYPE \(g.name) gauge\n\(g.name) \(Self.number(g.value))\n"
    }
    for family in s.families.sorted(by: { $0.name < $1.name }) {
      out += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(family.type)\n"
      for series in family.series() {
        let labels = family.label.map { "{\($0)=\(Self.label(series.value))}" } ?? ""
        out += "\(family.name)\(labels) \(Self.number(series.number))\n"
      }
    }
    return out
  }

  static func label(_ value: String) -> String {
    var out = "\""
    for c in value {
      switch c {
      case "\\": out += "\\\\"
      case "\"": out += "\\\""
      case "\n": out += "\\n"
      default: out.append(c)
      }
    }
    return out + "\""
  }

  /// Integers without a fraction (`10`, not `10.0`), others in shortest round-trip form.
  static func number(_ v: Double) -> String {
    if v.isNaN { return "NaN" }
    if v.isInfinite { return v > 0 ? "+Inf" : "-Inf" }
    if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
    return "\(v)"
  }
}
