/// Cross-origin resource sharing: one value, its header lists as data that endpoints add to.
///
/// ``apply(to:request:)`` runs on every response (the ``Router``'s `finalize`), so answers after
/// a body, errors and unmatched paths carry the same headers; ``preflight(_:request:methods:)``
/// fills in an `OPTIONS` answer. A preflight that names the headers it wants gets them echoed
/// (browsers ask only for what a script sets); otherwise ``allowedHeaders`` is offered.
/// ```swift
/// var cors = CORS(origins: ["https://app.example"])
/// cors.expose(["ETag", "Upload-Offset"])
/// cors.allow(["Authorization", "Tus-Resumable"])
/// ```
public struct CORS: Sendable {
  /// Allowed origins; `*` allows any; empty turns CORS off.
  public var origins: [String]
  /// Response headers a script may read (`Access-Control-Expose-Headers`), in order, unique.
  public private(set) var exposedHeaders: [String] = []
  /// Request headers a preflight offers when the browser does not name its own.
  public private(set) var allowedHeaders: [String] = []
  public var maxAgeSeconds = 86400

  public init(origins: [String]) { self.origins = origins }

  public mutating func expose(_ names: [String]) { Self.append(names, to: &exposedHeaders) }
  public mutating func allow(_ names: [String]) { Self.append(names, to: &allowedHeaders) }

  /// The origin to answer with, nil when CORS does not apply to this request.
  public func allowedOrigin(_ request: HTTPRequest) -> String? {
    guard let origin = request.headers["Origin"], !origins.isEmpty else { return nil }
    if origins.contains("*") { return "*" }
    return origins.contains(origin) ? origin : nil
  }

  /// Adds `Access-Control-Allow-Origin` (with `Vary: Origin` unless `*`) and the expose list;
  /// a response that already has an allowed origin is left alone, so applying twice is harmless.
  public func apply(to response: inout HTTPResponse, request: HTTPRequest) {
    guard let origin = allowedOrigin(request), !response.headers.contains("Access-Control-Allow-Origin")
    else {
      return
    }
    response.headers.set("Access-Control-Allow-Origin", origin)
    if origin != "*" { response.headers.add("Vary", "Origin") }
    response.headers.set("Access-Control-Expose-Headers", exposedHeaders.joined(separator: ", "))
  }

  /// Fills in a preflight answer: `Allow` always, the `Access-Control-Allow-*` headers for an
  /// allowed origin.
  public func preflight(_ response: inout HTTPResponse, request: HTTPRequest, methods: String) {
    response.headers.set("Allow", methods)
    guard allowedOrigin(request) != nil else { return }
    response.headers.set("Access-Control-Allow-Methods", methods)
    response.headers.set(
      "Access-Control-Allow-Headers",
      request.headers["Access-Control-Request-Headers"] ?? allowedHeaders.joined(separator: ", "))
    response.headers.set("Access-Control-Max-Age", String(maxAgeSeconds))
  }

  private static func append(_ names: [String], to list: inout [String]) {
    for name in names where !list.contains(where: { HTTPHeaders.same($0, name) }) { list.append(name) }
  }
}
