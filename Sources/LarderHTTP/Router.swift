/// Method + path-pattern dispatch on the raw, still percent-encoded path: the one table of
/// routes, the one place a thrown error becomes a response.
///
/// Patterns are `/`-separated: literal segments match exactly, `{name}` captures one raw
/// segment (decode it with `RouteParameters.decoded`), and a final `{name...}` captures the
/// rest of the path. Matching raw segments keeps `users%2Fu1` one segment, as Firebase
/// names require. A pattern ending in a literal is a collection and also matches with a
/// trailing slash (`/files/`, tusd's convention). A path that matches with another method gets
/// 405 with `Allow`; `HEAD` falls back to the `GET` route (the engine sends no body)
/// unless the route says ``RouteOptions/noHeadFallback``.
///
/// Labels are fixed when a route is added and never derived from the request, so metrics
/// and the access log have bounded cardinality; a request matching no route is `unmatched`.
/// Every error a handler or its body sink throws goes through ``errorMapper`` here, and every
/// response (success or error) through the route's `decorate` and then ``finalize``.
/// ```swift
/// var router = Router()
/// router.add("GET", "/v0/b/{bucket}/o/{name}", route: "objects.get") { request, params in
///   .respond(.text(try params.decoded("name")))
/// }
/// ```
public struct Router: HTTPHandler {
  public typealias Handler = @Sendable (HTTPRequest, RouteParameters) throws -> HTTPHeadDecision
  /// Adds headers to a response of one route (or of all, in ``finalize``), errors included.
  public typealias Decorator = @Sendable (inout HTTPResponse, HTTPRequest) -> Void

  /// A class, not a struct: every request walks the table, and copying a struct of seven
  /// reference-counted fields per route tried showed in profiles of small downloads.
  final class Route: Sendable {
    let method: String
    let segments: [Segment]
    let label: String
    let query: [String: String]
    let options: RouteOptions
    let decorate: Decorator?
    let handler: Handler
    /// Which of its requests the handler answers without waiting (``Router/runInline(_:when:)``).
    let inline: (@Sendable (HTTPRequest) -> Bool)?
    /// The pattern's shape, worked out once: whether it ends in `{rest...}`, and whether it is a
    /// collection (ends in a literal, so it also matches with a trailing slash).
    let hasRest: Bool
    let isCollection: Bool
    /// Which of its requests run on a pool of the application's (``Router/runOn(_:pool:when:)``).
    let pool: (WorkerPool, when: @Sendable (HTTPRequest) -> Bool)?

    init(
      method: String, segments: [Segment], label: String, query: [String: String], options: RouteOptions,
      decorate: Decorator?, inline: (@Sendable (HTTPRequest) -> Bool)? = nil,
      pool: (WorkerPool, when: @Sendable (HTTPRequest) -> Bool)? = nil, handler: @escaping Handler
    ) {
      self.method = method
      self.segments = segments
      self.label = label
      self.query = query
      self.options = options
      self.decorate = decorate
      self.inline = inline
      self.pool = pool
      self.handler = handler
      hasRest = segments.contains { if case .rest = $0 { true } else { false } }
      isCollection = if case .literal? = segments.last { true } else { false }
    }

    /// The literal a path's first segment must be for this route to match; nil when any will do.
    var firstLiteral: String? { if case .literal(let text)? = segments.first { text } else { nil } }
  }

  enum Segment: Sendable, Equatable {
    case literal(String)
    case parameter(String)
    case rest(String)
  }

  private var routes: [Route] = [] {
    didSet { index = Self.index(routes) }
  }
  /// The routes a path can match, by its first raw segment, each list in the order the routes
  /// were added: those whose pattern starts with that literal and those that start with a
  /// parameter. A request tries a handful of routes instead of the whole table.
  private var index: (byFirst: [Substring: [Route]], otherwise: [Route]) = ([:], [])
  /// Maps errors thrown by route handlers, their body sinks, and the layer to responses.
  public var errorMapper: @Sendable (any Error, HTTPRequest) -> HTTPResponse = { error, _ in
    HTTPResponse.defaultErrorResponse(for: error)
  }
  /// Applied last to every response, matched or not (CORS).
  public var finalize: Decorator = { _, _ in }

  public init() {}

  /// Registers `handler` for `method` and `pattern`; `route` names it in metrics and logs.
  /// A route with `query` matches only requests with those query values (`alt=media`; any value
  /// for ``anyValue``); routes are tried in the order added. `decorate` runs on every response of
  /// this route, errors too.
  public mutating func add(
    _ method: String, _ pattern: String, query: [String: String] = [:], route: String,
    options: RouteOptions = [], decorate: Decorator? = nil, _ handler: @escaping Handler
  ) {
    let parts = pattern.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
    let segments: [Segment] = parts.map { part in
      if part.hasPrefix("{") && part.hasSuffix("...}") { return .rest(String(part.dropFirst().dropLast(4))) }
      if part.hasPrefix("{") && part.hasSuffix("}") { return .parameter(String(part.dropFirst().dropLast())) }
      return .literal(String(part))
    }
    routes.append(
      Route(
        method: method.uppercased(), segments: segments, label: route, query: query, options: options,
        decorate: decorate,
        handler: handler))
  }

  /// A route's `query` value that matches any value, as long as the parameter is present
  /// (`["X-Goog-Signature": Router.anyValue]`: only signed URLs).
  public static let anyValue = "*"

  /// The labels a request can be counted under: every route's, and `unmatched`.
  public var labels: Set<String> { Set(routes.map(\.label) + ["unmatched"]) }

  /// Lets the routes labelled `labels` answer the requests `when` accepts on the thread that
  /// parsed them (``HTTPHandler/start(_:)``): for handlers that never wait on the network, an
  /// fsync or a render, so an engine saves two thread switches per request.
  public mutating func runInline(_ labels: Set<String>, when predicate: @escaping @Sendable (HTTPRequest) -> Bool) {
    routes = routes.map { r in
      guard labels.contains(r.label) else { return r }
      return Route(
        method: r.method, segments: r.segments, label: r.label, query: r.query, options: r.options,
        decorate: r.decorate, inline: predicate, pool: r.pool, handler: r.handler)
    }
  }

  /// Lets the routes labelled `labels` run the requests `when` accepts on `pool` and answer
  /// later (``HTTPHeadDecision/later(route:_:)``): for handlers that wait on a bounded resource
  /// of the application's (a render pool), so a burst of them holds none of the engine's workers.
  public mutating func runOn(
    _ labels: Set<String>, pool: WorkerPool, when predicate: @escaping @Sendable (HTTPRequest) -> Bool
  ) {
    routes = routes.map { r in
      guard labels.contains(r.label) else { return r }
      return Route(
        method: r.method, segments: r.segments, label: r.label, query: r.query, options: r.options,
        decorate: r.decorate, inline: r.inline, pool: (pool, predicate), handler: r.handler)
    }
  }

  private static func index(_ routes: [Route]) -> (byFirst: [Substring: [Route]], otherwise: [Route]) {
    var byFirst: [Substring: [Route]] = [:]
    for literal in Set(routes.compactMap(\.firstLiteral)) {
      byFirst[literal[...]] = routes.filter { $0.firstLiteral.map { $0 == literal } ?? true }
    }
    return (byFirst, routes.filter { $0.firstLiteral == nil })
  }

  public func head(_ request: HTTPRequest) -> HTTPHeadDecision {
    switch resolve(request) {
    case .route(let route, let params): run(route, request, params)
    case .answered(let decision): decision
    }
  }

  public func start(_ request: HTTPRequest) -> HTTPHeadStart {
    switch resolve(request) {
    case .route(let route, let params):
      if let inline = route.inline, inline(request) { return .now(run(route, request, params)) }
      if let (pool, when) = route.pool, when(request) {
        return .later(route: route.label) { responder in pool.submit { responder.respond(run(route, request, params)) } }
      }
      return .onWorker { run(route, request, params) }
    case .answered(let decision): return .now(decision)
    }
  }

  private enum Resolution {
    case route(Route, RouteParameters)
    /// No route runs: a 404 or 405, made without waiting.
    case answered(HTTPHeadDecision)
  }

  private func resolve(_ request: HTTPRequest) -> Resolution {
    let path = request.rawPathSegments
    let override = request.headers["X-HTTP-Method-Override"]?.uppercased()
    var allowed: [String] = []
    var fallback: (Route, RouteParameters)?
    var headFallbackAllowed = false
    let candidates = path.first.flatMap { index.byFirst[$0] } ?? index.otherwise
    for route in candidates {
      guard let params = Self.match(route, path),
        route.query.allSatisfy({
          $0.value == Self.anyValue ? request.queryValue($0.key) != nil : request.queryValue($0.key) == $0.value
        })
      else { continue }
      let method =
        route.options.contains(.acceptsMethodOverride) ? (override ?? request.method) : request.method
      if route.method == method { return .route(route, params) }
      if route.method == "GET" && !route.options.contains(.noHeadFallback) {
        headFallbackAllowed = true
        if method == "HEAD" && fallback == nil { fallback = (route, params) }
      }
      allowed.append(route.method)
    }
    if let (route, params) = fallback { return .route(route, params) }
    var response: HTTPResponse
    if allowed.isEmpty {
      response = .error(status: 404, message: "no route for \(String(request.path.prefix(200)))")
    } else {
      if headFallbackAllowed && !allowed.contains("HEAD") { allowed.append("HEAD") }
      response = HTTPResponse.error(status: 405, message: "method \(request.method.prefix(32)) not allowed")
      response.headers.set("Allow", Self.dedupe(allowed).joined(separator: ", "))
    }
    finalize(&response, request)
    return .answered(.respond(response, route: "unmatched"))
  }

  /// For errors the layer meets before or outside a route (a malformed target, a body over
  /// the server's limit): the same mapper and `finalize` as routed errors.
  public func errorResponse(for error: any Error, request: HTTPRequest) -> HTTPResponse {
    var response = errorMapper(error, request)
    finalize(&response, request)
    return response
  }

  private func run(_ route: Route, _ request: HTTPRequest, _ params: RouteParameters) -> HTTPHeadDecision {
    let action: HTTPHeadDecision.Action
    do {
      action = try route.handler(request, params).action
    } catch {
      return .respond(respond(to: error, route: route, request: request, sink: nil), route: route.label)
    }
    return routed(action, route: route, request: request)
  }

  /// `action` of `route` with its answers decorated and its errors mapped, given now or later.
  private func routed(_ action: HTTPHeadDecision.Action, route: Route, request: HTTPRequest) -> HTTPHeadDecision {
    switch action {
    case .respond(let response):
      return .respond(decorated(response, route: route, request: request, sink: nil), route: route.label)
    case .receiveBody(let sink):
      return .receiveBody(
        RoutedBodySink(sink, route: route, request: request, router: self), route: route.label)
    case .later(let start):
      return .later(route: route.label) { responder in
        start(
          responder.mapped(
            { routed($0.action, route: route, request: request) },
            mapError: { respond(to: $0, route: route, request: request, sink: nil) }))
      }
    }
  }

  /// The one catch's other half: an error of `route` (or of its sink) as a response.
  fileprivate func respond(to error: any Error, route: Route, request: HTTPRequest, sink: (any HTTPBodySink)?)
    -> HTTPResponse
  {
    decorated(errorMapper(error, request), route: route, request: request, sink: sink)
  }

  fileprivate func decorated(
    _ response: HTTPResponse, route: Route, request: HTTPRequest, sink: (any HTTPBodySink)?
  )
    -> HTTPResponse
  {
    var r = response
    sink?.decorate(&r)
    route.decorate?(&r, request)
    finalize(&r, request)
    return r
  }

  static func match(_ route: Route, _ path: [Substring]) -> RouteParameters? {
    let pattern = route.segments
    // Without a rest segment only a path of the pattern's length matches (a collection's also
    // one longer, its trailing slash): checked first, so routes that cannot match capture nothing.
    if !route.hasRest {
      guard path.count == pattern.count || (route.isCollection && path.count == pattern.count + 1) else { return nil }
    }
    var values = RouteParameters()
    var i = 0
    for segment in pattern {
      switch segment {
      case .rest(let name):
        values.pairs.append((name, path[min(i, path.count)...].joined(separator: "/")[...]))
        return values
      case .literal(let text):
        guard i < path.count, path[i] == text else { return nil }
      case .parameter(let name):
        guard i < path.count, !path[i].isEmpty else { return nil }
        values.pairs.append((name, path[i]))
      }
      i += 1
    }
    if i == path.count { return values }
    // A collection (pattern ending in a literal) also answers with a trailing slash.
    if route.isCollection, i == path.count - 1, path[i].isEmpty { return values }
    return nil
  }

  private static func dedupe(_ methods: [String]) -> [String] {
    var seen = Set<String>()
    return methods.filter { seen.insert($0).inserted }
  }
}

/// How a route matches beyond method and path.
public struct RouteOptions: OptionSet, Sendable {
  public let rawValue: Int
  public init(rawValue: Int) { self.rawValue = rawValue }
  /// `X-HTTP-Method-Override` names the method (tus, for clients behind proxies that allow only
  /// GET and POST). The override only selects among declared routes: it never makes a label.
  public static let acceptsMethodOverride = RouteOptions(rawValue: 1 << 0)
  /// A `GET` route that `HEAD` does not fall back to (and `Allow` does not list `HEAD` for).
  public static let noHeadFallback = RouteOptions(rawValue: 1 << 1)
}

/// Sends a routed sink's errors through the router's one mapping, and its answers through the
/// route's decorators.
final class RoutedBodySink: HTTPBodySink {
  private let inner: any HTTPBodySink
  private let route: Router.Route
  private let request: HTTPRequest
  private let router: Router

  init(_ inner: any HTTPBodySink, route: Router.Route, request: HTTPRequest, router: Router) {
    self.inner = inner
    self.route = route
    self.request = request
    self.router = router
  }

  func receive(_ chunk: UnsafeRawBufferPointer) throws {
    do {
      try inner.receive(chunk)
    } catch {
      // Already a response: the server sends it as it is (see `HTTPResponseError`).
      throw HTTPResponseError(router.respond(to: error, route: route, request: request, sink: inner))
    }
  }

  func finish() throws -> HTTPResponse {
    do {
      return router.decorated(try inner.finish(), route: route, request: request, sink: inner)
    } catch {
      return router.respond(to: error, route: route, request: request, sink: inner)
    }
  }

  func cancel() { inner.cancel() }
}

/// Values captured by a route pattern, raw (still percent-encoded) until asked for decoded.
public struct RouteParameters: Sendable {
  /// In pattern order; a route has a handful, so a search beats hashing.
  var pairs: [(name: String, value: Substring)] = []

  /// Every captured value by name, raw.
  public var raw: [String: Substring] { Dictionary(pairs, uniquingKeysWith: { first, _ in first }) }

  init() { pairs.reserveCapacity(3) }

  /// The strictly percent-decoded value of parameter `name`.
  /// - Throws: `HTTPRequestError.malformedPercentEncoding` or `.invalidUTF8`; a missing
  ///   name is a programming error and traps.
  public func decoded(_ name: String) throws(HTTPRequestError) -> String {
    guard let value = pairs.first(where: { $0.name == name })?.value else {
      preconditionFailure("route has no parameter \(name)")
    }
    return try PercentEncoding.decode(value)
  }
}
