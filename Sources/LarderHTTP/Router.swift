/// Method + path-pattern dispatch on the raw, still percent-encoded path.
///
/// Patterns are `/`-separated: literal segments match exactly, `{name}` captures one raw
/// segment (decode it with `RouteParameters.decoded`), and a final `{name...}` captures the
/// rest of the path. Matching raw segments keeps `users%2Fu1` one segment, as Firebase
/// names require. A path that matches with another method gets 405 with `Allow`; `HEAD`
/// falls back to the `GET` route (libmicrohttpd drops the body).
/// ```swift
/// var router = Router()
/// router.add("GET", "/v0/b/{bucket}/o/{name}", route: "objects.get") { request, params in
///   .respond(.text(try params.decoded("name")))
/// }
/// ```
public struct Router: HTTPHandler {
  public typealias Handler = @Sendable (HTTPRequest, RouteParameters) throws -> HTTPHeadDecision

  struct Route: Sendable {
    let method: String
    let segments: [Segment]
    let label: String
    let handler: Handler
  }

  enum Segment: Sendable, Equatable {
    case literal(String)
    case parameter(String)
    case rest(String)
  }

  private var routes: [Route] = []
  /// Maps errors thrown by route handlers (and by the layer) to responses.
  public var errorMapper: @Sendable (any Error, HTTPRequest) -> HTTPResponse = { error, _ in
    HTTPResponse.defaultErrorResponse(for: error)
  }

  public init() {}

  /// Registers `handler` for `method` and `pattern`; `route` names it in metrics and logs.
  public mutating func add(_ method: String, _ pattern: String, route: String, _ handler: @escaping Handler) {
    let parts = pattern.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
    let segments: [Segment] = parts.map { part in
      if part.hasPrefix("{") && part.hasSuffix("...}") { return .rest(String(part.dropFirst().dropLast(4))) }
      if part.hasPrefix("{") && part.hasSuffix("}") { return .parameter(String(part.dropFirst().dropLast())) }
      return .literal(String(part))
    }
    routes.append(Route(method: method.uppercased(), segments: segments, label: route, handler: handler))
  }

  public func head(_ request: HTTPRequest) -> HTTPHeadDecision {
    let path = request.rawPathSegments
    var allowed: [String] = []
    var fallback: (Route, RouteParameters)?
    for route in routes {
      guard let params = Self.match(route.segments, path) else { continue }
      if route.method == request.method { return run(route, request, params) }
      if request.method == "HEAD" && route.method == "GET" && fallback == nil { fallback = (route, params) }
      allowed.append(route.method)
    }
    if let (route, params) = fallback { return run(route, request, params) }
    if allowed.isEmpty {
      return .respond(
        .error(status: 404, message: "no route for \(String(request.path.prefix(200)))"), route: "unmatched")
    }
    if allowed.contains("GET") && !allowed.contains("HEAD") { allowed.append("HEAD") }
    var response = HTTPResponse.error(status: 405, message: "method \(request.method.prefix(32)) not allowed")
    response.headers.set("Allow", Self.dedupe(allowed).joined(separator: ", "))
    return .respond(response, route: "unmatched")
  }

  public func errorResponse(for error: any Error, request: HTTPRequest) -> HTTPResponse {
    errorMapper(error, request)
  }

  private func run(_ route: Route, _ request: HTTPRequest, _ params: RouteParameters) -> HTTPHeadDecision {
    var decision: HTTPHeadDecision
    do {
      decision = try route.handler(request, params)
    } catch {
      decision = .respond(errorMapper(error, request))
    }
    if decision.routeLabel == nil { decision.routeLabel = route.label }
    return decision
  }

  static func match(_ pattern: [Segment], _ path: [Substring]) -> RouteParameters? {
    var values: [String: Substring] = [:]
    var i = 0
    for segment in pattern {
      switch segment {
      case .rest(let name):
        values[name] = path[min(i, path.count)...].joined(separator: "/")[...]
        return RouteParameters(raw: values)
      case .literal(let text):
        guard i < path.count, path[i] == text else { return nil }
      case .parameter(let name):
        guard i < path.count, !path[i].isEmpty else { return nil }
        values[name] = path[i]
      }
      i += 1
    }
    return i == path.count ? RouteParameters(raw: values) : nil
  }

  private static func dedupe(_ methods: [String]) -> [String] {
    var seen = Set<String>()
    return methods.filter { seen.insert($0).inserted }
  }
}

/// Values captured by a route pattern, raw (still percent-encoded) until asked for decoded.
public struct RouteParameters: Sendable {
  public let raw: [String: Substring]

  /// The strictly percent-decoded value of parameter `name`.
  /// - Throws: `HTTPRequestError.malformedPercentEncoding` or `.invalidUTF8`; a missing
  ///   name is a programming error and traps.
  public func decoded(_ name: String) throws(HTTPRequestError) -> String {
    guard let value = raw[name] else { preconditionFailure("route has no parameter \(name)") }
    return try PercentEncoding.decode(value)
  }
}
