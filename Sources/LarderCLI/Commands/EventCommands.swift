import Foundation
import Larder

/// `larder events subscribe URL --bucket B …`: a webhook subscription; prints its id and secret once.
struct EventsSubscribeCommand: Command {
  static let url = Positional("URL", help: "where events are POSTed: http:// or https://")
  static let bucket = Option.value("--bucket", "BUCKET", help: "the bucket whose objects' changes are sent (required)")
  static let prefix = Option.value("--prefix", "PREFIX", help: "only names that start with PREFIX")
  static let kinds = Option.value(
    "--kinds", "KINDS", help: "comma-separated: finalized, deleted, metadataUpdated (default: all three)")
  static let mode = Option.value(
    "--mode", "MODE", default: "binary", help: "binary (ce-* headers, as Cloud Functions) or structured")

  static let configuration = CommandConfiguration(
    name: "events subscribe",
    summary: "send object-change events (CloudEvents) to a webhook",
    discussion: """
      Every change committed from now on to an object of BUCKET (under PREFIX, of KINDS) is
      POSTed to URL as a CloudEvent with Google's types (google.cloud.storage.object.v1.*) and
      the GCS object resource as data, at least once and in order per object, signed with the
      Standard Webhooks scheme. Prints the subscription's id and its secret (whsec_…); the
      secret is not shown again. The running server delivers; this command only records.
      """,
    positionals: [url], options: [bucket, prefix, kinds, mode], groups: [StoreOptions.self])

  var store: StoreOptions
  var target: String
  var bucketName: String
  var namePrefix: String
  var kindList: [ObjectChangeKind]
  var deliveryMode: EventSubscription.Mode

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    target = arguments.required(Self.url)
    guard let bucket = arguments.value(Self.bucket) else { throw UsageError("--bucket is required") }
    bucketName = bucket
    namePrefix = arguments.value(Self.prefix) ?? ""
    do { kindList = try ObjectChangeKind.parseList(arguments.value(Self.kinds)) } catch { throw UsageError("\(error)") }
    guard let mode = EventSubscription.Mode(rawValue: arguments.value(Self.mode) ?? "binary") else {
      throw UsageError("--mode must be binary or structured")
    }
    deliveryMode = mode
  }

  func run() throws {
    let made = try store.open().events.subscribe(
      url: target, bucket: bucketName, prefix: namePrefix, kinds: kindList, mode: deliveryMode)
    print("id\t\(made.id)")
    print("secret\t\(made.secret)")
  }
}

/// `larder events list`.
struct EventsListCommand: Command {
  static let configuration = CommandConfiguration(
    name: "events list", summary: "list webhook subscriptions with their pending and dead counts",
    groups: [StoreOptions.self])

  var store: StoreOptions

  init(_ arguments: ParsedArguments) throws(UsageError) { store = try StoreOptions(arguments) }

  func run() throws {
    let larder = try store.open()
    let backlog = Dictionary(uniqueKeysWithValues: try larder.events.backlog().map { ($0.subscriptionID, $0) })
    for s in try larder.events.subscriptions() {
      let b = backlog[s.id]
      print(
        "\(s.id)\t\(s.url)\tbucket=\(s.bucket)\tprefix=\(s.prefix)\tkinds=\(s.kinds.map(\.rawValue).joined(separator: ","))"
          + "\tmode=\(s.mode.rawValue)\tpending=\(b?.pending ?? 0)\tdead=\(b?.dead ?? 0)")
    }
  }
}

/// `larder events unsubscribe ID`.
struct EventsUnsubscribeCommand: Command {
  static let id = Positional("ID", help: "the subscription")
  static let configuration = CommandConfiguration(
    name: "events unsubscribe", summary: "remove a webhook subscription and its pending and dead deliveries",
    positionals: [id], groups: [StoreOptions.self])

  var store: StoreOptions
  var target: String

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    target = arguments.required(Self.id)
  }

  func run() throws {
    try store.open().events.unsubscribe(id: target)
    print("unsubscribed \(target)")
  }
}

/// Which deliveries a listing command shows: `events pending` or `events dead`.
protocol EventDeliveryListing: Sendable {
  static var state: EventDelivery.State { get }
  static var name: String { get }
  static var summary: String { get }
}

enum PendingDeliveries: EventDeliveryListing {
  static let state = EventDelivery.State.pending
  static let name = "events pending"
  static let summary = "list deliveries not acknowledged yet (event id, subscription, object, attempts)"
}

enum DeadDeliveries: EventDeliveryListing {
  static let state = EventDelivery.State.dead
  static let name = "events dead"
  static let summary = "list dead-lettered deliveries (retried until given up); replay sends them again"
}

/// `larder events pending` and `larder events dead`: one line per delivery, with its last error.
struct EventsDeliveriesCommand<Listing: EventDeliveryListing>: Command {
  static var configuration: CommandConfiguration {
    CommandConfiguration(
      name: Listing.name, summary: Listing.summary, options: [EventsSubscriptionOption.subscription],
      groups: [StoreOptions.self])
  }

  var store: StoreOptions
  var subscription: String?

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    subscription = arguments.value(EventsSubscriptionOption.subscription)
  }

  func run() throws {
    for d in try store.open().events.deliveries(Listing.state, subscription: subscription) {
      print(
        "\(d.event.id)\t\(d.subscriptionID)\t\(d.event.kind.rawValue)\t\(d.event.object.bucket)/\(d.event.object.name)"
          + "\tgeneration=\(d.event.object.generation)\tattempts=\(d.attempts)\t\(d.lastError ?? "")")
    }
  }
}

enum EventsSubscriptionOption {
  static let subscription = Option.value("--subscription", "ID", help: "only this subscription's")
}

/// `larder events replay ID` or `--since TIME`: send events again from the outbox, same ids.
struct EventsReplayCommand: Command {
  static let id = Positional("EVENT_ID", optional: true, help: "the event to send again")
  static let since = Option.value("--since", "TIME", help: "every event committed at or after TIME (RFC 3339)")
  static let configuration = CommandConfiguration(
    name: "events replay", summary: "send events again from the outbox (same ids)",
    discussion: """
      Makes the deliveries of one event (EVENT_ID) or of every event since TIME pending again,
      for the subscriptions that had them (or only --subscription, which then gets them even if
      they did not match it). Delivered events stay in the outbox for the retention (7 days).
      """,
    positionals: [id], options: [since, EventsSubscriptionOption.subscription], groups: [StoreOptions.self])

  var store: StoreOptions
  var eventID: String?
  var sinceTime: Date?
  var subscription: String?

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    eventID = arguments.value(Self.id)
    subscription = arguments.value(EventsSubscriptionOption.subscription)
    if let text = arguments.value(Self.since) {
      guard let date = try? Date(text, strategy: .iso8601) else {
        throw UsageError("--since must be an RFC 3339 time (2026-12-06T02:00:00Z), got '\(text)'")
      }
      sinceTime = date
    }
    guard (eventID == nil) != (sinceTime == nil) else { throw UsageError("give either EVENT_ID or --since TIME") }
  }

  func run() throws {
    let events = try store.open().events
    let count =
      if let eventID {
        try events.replay(eventID: eventID, subscription: subscription)
      } else {
        try events.replay(since: sinceTime!, subscription: subscription)
      }
    print("replayed \(count) deliveries")
  }
}
