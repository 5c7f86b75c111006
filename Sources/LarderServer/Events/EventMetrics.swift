import Foundation
import Larder
import LarderHTTP

/// `/metrics` for object-change events, per subscription (at most ``ObjectEvents/maxSubscriptions``
/// label values): pending events and the age of the oldest (lag) and dead letters from the
/// catalog, deliveries and failed attempts of this process since start.
enum EventMetrics {
  static func register(larder: Larder, deliverer: EventDeliverer?, in metrics: Metrics) {
    metrics.registerFamily(
      "larder_event_pending", help: "Object-change events not yet acknowledged, per subscription.",
      label: "subscription"
    ) { ((try? larder.events.backlog()) ?? []).map { ($0.subscriptionID, Double($0.pending)) } }
    metrics.registerFamily(
      "larder_event_lag_seconds", help: "Age of the oldest pending event, per subscription (0: none pending).",
      label: "subscription"
    ) {
      ((try? larder.events.backlog()) ?? []).map {
        ($0.subscriptionID, $0.lagSeconds())
      }
    }
    metrics.registerFamily(
      "larder_event_dead", help: "Dead-lettered deliveries kept, per subscription.", label: "subscription"
    ) { ((try? larder.events.backlog()) ?? []).map { ($0.subscriptionID, Double($0.dead)) } }
    guard let deliverer else { return }
    metrics.registerFamily(
      "larder_event_delivered_total", help: "Deliveries acknowledged with a 2xx by this process, per subscription.",
      type: "counter", label: "subscription"
    ) { deliverer.counts.sorted { $0.key < $1.key }.map { ($0.key, Double($0.value.delivered)) } }
    metrics.registerFamily(
      "larder_event_retried_total", help: "Failed delivery attempts to be retried, by this process, per subscription.",
      type: "counter", label: "subscription"
    ) { deliverer.counts.sorted { $0.key < $1.key }.map { ($0.key, Double($0.value.retried)) } }
  }
}
