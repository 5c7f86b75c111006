import Foundation
import Larder
import LarderAuth
import LarderHTTP

/// `/admin/v1/events…`: webhook subscriptions, their deliveries, replays and the feed.
///
/// Admin identities only, as `/admin/v1/store`: a subscription makes the server send requests
/// to any address it can reach, and the feed shows every change of every bucket.
///
///     GET    /admin/v1/events/subscriptions            list (secrets left out)
///     POST   /admin/v1/events/subscriptions            {"url","bucket","prefix","kinds","mode"} → 201, with the secret
///     DELETE /admin/v1/events/subscriptions/{id}
///     GET    /admin/v1/events/deliveries?state=pending|dead[&subscription=ID]
///     POST   /admin/v1/events/replay                   {"eventId"} or {"since": RFC 3339}, optional "subscription"
///     GET    /admin/v1/events?after=CURSOR&wait=30      the feed, in commit order, with "next"
struct EventsEndpoint {
  let context: ServiceContext

  /// The longest a feed request waits for an event.
  static let maxWait = 60

  struct SubscriptionAnswer: Encodable {
    var id: String
    var url: String
    var bucket: String
    var prefix: String
    var kinds: [String]
    var mode: String
    var createdAt: String
    var secret: String?

    init(_ s: EventSubscription, withSecret: Bool) {
      id = s.id
      url = s.url
      bucket = s.bucket
      prefix = s.prefix
      kinds = s.kinds.map(\.rawValue)
      mode = s.mode.rawValue
      createdAt = StoredObject.timestamp(s.createdAt)
      secret = withSecret ? s.secret : nil
    }
  }

  struct SubscribeRequest: Decodable {
    var url: String
    var bucket: String
    var prefix: String?
    var kinds: [String]?
    var mode: String?
  }

  struct ReplayRequest: Decodable {
    var eventId: String?
    var since: String?
    var subscription: String?
  }

  struct DeliveryAnswer: Encodable {
    var subscription: String
    var eventId: String
    var type: String
    var bucket: String
    var name: String
    var generation: String
    var time: String
    var state: String
    var attempts: Int
    var nextAttemptAt: String
    var lastError: String?
  }

  func register(in router: inout Router) {
    let poll = FeedLongPoll(events: context.larder.events)
    router.add("GET", "/admin/v1/events/subscriptions", route: "admin.events.subscriptions") { request, _ in
      try admit(request)
      let list = try context.larder.events.subscriptions().map { SubscriptionAnswer($0, withSecret: false) }
      return .respond(Self.noStore(.json(["subscriptions": list])))
    }
    router.add("POST", "/admin/v1/events/subscriptions", route: "admin.events.subscribe") { request, _ in
      try admit(request)
      return .receiveBody(
        BufferedBodySink(limit: 16 * 1024) { body in
          let asked = try Self.decode(SubscribeRequest.self, body)
          let kinds = try ObjectChangeKind.parseList(asked.kinds?.joined(separator: ","))
          guard let mode = EventSubscription.Mode(rawValue: asked.mode ?? "binary") else {
            throw LarderError.invalidArgument("mode must be binary or structured")
          }
          let made = try context.larder.events.subscribe(
            url: asked.url, bucket: asked.bucket, prefix: asked.prefix ?? "", kinds: kinds, mode: mode)
          return Self.noStore(.json(status: 201, SubscriptionAnswer(made, withSecret: true)))
        })
    }
    router.add("DELETE", "/admin/v1/events/subscriptions/{id}", route: "admin.events.unsubscribe") { request, params in
      try admit(request)
      try context.larder.events.unsubscribe(id: try params.decoded("id"))
      return .respond(HTTPResponse(status: 204))
    }
    router.add("GET", "/admin/v1/events/deliveries", route: "admin.events.deliveries") { request, _ in
      try admit(request)
      guard let state = EventDelivery.State(rawValue: request.queryValue("state") ?? "pending"), state != .delivered
      else { throw LarderError.invalidArgument("state must be pending or dead") }
      let list = try context.larder.events.deliveries(state, subscription: request.queryValue("subscription"))
      return .respond(Self.noStore(.json(["deliveries": list.map(Self.answer)])))
    }
    router.add("POST", "/admin/v1/events/replay", route: "admin.events.replay") { request, _ in
      try admit(request)
      return .receiveBody(
        BufferedBodySink(limit: 16 * 1024) { body in
          let asked = try Self.decode(ReplayRequest.self, body)
          let count: Int
          switch (asked.eventId, asked.since) {
          case (let id?, nil): count = try context.larder.events.replay(eventID: id, subscription: asked.subscription)
          case (nil, let since?):
            count = try context.larder.events.replay(since: try Self.date(since), subscription: asked.subscription)
          default: throw LarderError.invalidArgument("a replay names either eventId or since")
          }
          return Self.noStore(.json(["replayed": count]))
        })
    }
    router.add("GET", "/admin/v1/events", route: "admin.events.feed") { request, _ in
      try admit(request)
      let cursor = try ObjectEventCursor(request.queryValue("after") ?? "")
      let limit = try Self.number(request.queryValue("limit"), name: "limit", range: 1...1000) ?? 100
      let wait = try Self.number(request.queryValue("wait"), name: "wait", range: 0...Self.maxWait) ?? 0
      guard wait > 0 else {
        return .respond(Self.noStore(feed(try context.larder.events.feed(after: cursor, limit: limit), request: request)))
      }
      let deadline = ContinuousClock.now + .seconds(wait)
      return .later { responder in longPoll(poll, after: cursor, limit: limit, deadline: deadline, request, responder) }
    }
  }

  /// A feed request that waits up to `deadline` for its first event, holding no thread
  /// (``FeedLongPoll``). Registered before the first read, so an event committed between the
  /// two is not missed. When the server stops waiting (client gone, draining) it answers at once
  /// with nothing new.
  private func longPoll(
    _ poll: FeedLongPoll, after cursor: ObjectEventCursor, limit: Int, deadline: ContinuousClock.Instant,
    _ request: HTTPRequest, _ responder: HTTPResponder
  ) {
    let id = poll.add(after: cursor, limit: limit, deadline: deadline) { page in
      responder.respond { Self.noStore(feed(try page.get(), request: request)) }
    }
    responder.onStopWaiting {
      if poll.remove(id) { responder.respond(Self.noStore(feed((events: [], next: cursor), request: request))) }
    }
    do {
      let page = try context.larder.events.feed(after: cursor, limit: limit)
      if !page.events.isEmpty, poll.remove(id) { responder.respond(Self.noStore(feed(page, request: request))) }
    } catch {
      if poll.remove(id) { responder.fail(error) }
    }
  }

  /// The feed's page as its answer.
  private func feed(_ page: FeedLongPoll.Page, request: HTTPRequest) -> HTTPResponse {
    let base = (try? FirebaseUploads(context: context).uploadBase(request)) ?? ""
    return .json(encoded: Self.feedJSON(page) { CloudEventMessage.resource($0, larder: context.larder, base: base) })
  }

  /// A page of the change feed: `{"events":[structured-mode documents],"next":cursor}`.
  static func feedJSON(_ page: FeedLongPoll.Page, resource: (ObjectEvent) -> GcsObjectResource) -> [UInt8] {
    var json = JSONWriter(escapingSlashes: false, capacity: 1024 * max(1, page.events.count))
    json.beginObject()
    json.key("events")
    json.beginArray()
    for event in page.events { CloudEventMessage.writeDocument(event, resource: resource(event), to: &json) }
    json.endArray()
    json.field("next", page.next.description)
    json.endObject()
    return json.bytes
  }

  private func admit(_ request: HTTPRequest) throws {
    guard let identity = try context.identity(request) else { throw AuthError.missingToken }
    guard identity.serviceAccount != nil else {
      throw AccessError.denied(reason: "object-change events are for admin identities (service accounts) only")
    }
  }

  static func answer(_ d: EventDelivery) -> DeliveryAnswer {
    DeliveryAnswer(
      subscription: d.subscriptionID, eventId: d.event.id, type: d.event.kind.cloudEventType, bucket: d.event.object.bucket,
      name: d.event.object.name, generation: String(d.event.object.generation), time: StoredObject.timestamp(d.event.time),
      state: d.state.rawValue, attempts: d.attempts, nextAttemptAt: StoredObject.timestamp(d.nextAttemptAt),
      lastError: d.lastError)
  }

  static func decode<T: Decodable>(_ type: T.Type, _ body: [UInt8]) throws -> T {
    do { return try JSONDecoder().decode(type, from: Data(body)) } catch {
      throw LarderError.invalidArgument("the body is not the JSON this call takes: \(error)")
    }
  }

  /// An RFC 3339 time (`2026-12-06T02:00:00Z`, fractions allowed).
  static func date(_ text: String) throws(LarderError) -> Date {
    if let date = try? Date(text, strategy: .iso8601) { return date }
    if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
    throw .invalidArgument("'\(text.prefix(40))' is not an RFC 3339 time (2026-12-06T02:00:00Z)")
  }

  static func number(_ text: String?, name: String, range: ClosedRange<Int>) throws(LarderError) -> Int? {
    guard let text else { return nil }
    guard let n = Int(text), range.contains(n) else {
      throw .invalidArgument("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)")
    }
    return n
  }

  static func noStore(_ response: HTTPResponse) -> HTTPResponse {
    var response = response
    response.headers.set("Cache-Control", "no-store")
    return response
  }
}
