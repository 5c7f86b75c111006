import Foundation
import Larder
import LarderHTTP

/// The HTTP application: routes requests to the object and upload endpoints.
///
/// ```
/// GET  /healthz                      liveness
/// GET  /metrics                      Prometheus text
/// *    /v0/b/{bucket}/o[/{name}]     objects (Firebase Storage REST shape)
/// *    /v0/b/{bucket}/uploads[/{id}] resumable uploads (tus 1.0.0)
/// ```
public final class LarderApp: HTTPHandler {
  public let context: ServiceContext
  let objects: ObjectsEndpoint
  let uploads: (any BucketEndpoint)?
  let metrics: Metrics?

  public init(context: ServiceContext, uploads: (any BucketEndpoint)? = nil, metrics: Metrics? = nil) {
    self.context = context
    self.objects = ObjectsEndpoint(context: context)
    self.uploads = uploads
    self.metrics = metrics
  }

  public func head(_ request: HTTPRequest) -> HTTPHeadDecision {
    do {
      var decision = try route(request)
      switch decision.action {
      case .respond(var response):
        addCORS(to: &response, request: request)
        decision.action = .respond(response)
      case .receiveBody(let sink):
        // Answers produced after the body need the same CORS headers.
        decision.action = .receiveBody(CORSBodySink(sink, app: self, request: request))
      }
      return decision
    } catch {
      var response = errorResponse(for: error, request: request)
      addCORS(to: &response, request: request)
      return .respond(response, route: "error")
    }
  }

  public func errorResponse(for error: any Error, request: HTTPRequest) -> HTTPResponse {
    APIError.response(for: error)
  }

  func route(_ request: HTTPRequest) throws -> HTTPHeadDecision {
    let segments = request.rawPathSegments
    switch (request.method, segments.first) {
    case ("GET", "healthz"), ("HEAD", "healthz"):
      guard segments.count == 1 else { break }
      return .respond(.json(["status": "ok"]), route: "healthz")
    case ("GET", "metrics"):
      guard segments.count == 1, let metrics else { break }
      return .respond(
        HTTPResponse(
          status: 200, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"],
          body: .bytes(Array(metrics.renderPrometheus().utf8))), route: "metrics")
    default:
      break
    }
    guard segments.count >= 4, segments[0] == "v0", segments[1] == "b" else {
      return .respond(.error(status: 404, message: "no such endpoint"), route: "unmatched")
    }
    let bucket = try PercentEncoding.decode(segments[2])
    try ObjectName.validateBucket(bucket)
    let rest = Array(segments[3...])
    if request.method == "OPTIONS" && rest.first == "o" {
      return .respond(preflight(request, allow: "GET, HEAD, POST, PATCH, DELETE, OPTIONS"), route: "cors")
    }
    // Authenticate once; a bad credential is a 401 whatever the route.
    let identity = try context.authenticator.authenticate(request.headers)
    switch rest.first {
    case "o":
      return try objects.handle(request, bucket: bucket, rest: rest, identity: identity)
    case "uploads":
      guard let uploads else { break }
      return try uploads.handle(request, bucket: bucket, rest: rest, identity: identity)
    default:
      break
    }
    return .respond(.error(status: 404, message: "no such endpoint"), route: "unmatched")
  }

  func preflight(_ request: HTTPRequest, allow: String) -> HTTPResponse {
    var r = HTTPResponse(status: 204)
    r.headers.set("Allow", allow)
    guard allowedOrigin(request) != nil else { return r }
    r.headers.set("Access-Control-Allow-Methods", allow)
    r.headers.set(
      "Access-Control-Allow-Headers",
      request.headers["Access-Control-Request-Headers"]
        ?? "Authorization, Content-Type, Range, If-None-Match, If-Match, X-Goog-Meta-*")
    r.headers.set("Access-Control-Max-Age", "86400")
    return r
  }

  func allowedOrigin(_ request: HTTPRequest) -> String? {
    guard let origin = request.headers["Origin"], !context.corsOrigins.isEmpty else { return nil }
    if context.corsOrigins.contains("*") { return "*" }
    return context.corsOrigins.contains(origin) ? origin : nil
  }

  func addCORS(to response: inout HTTPResponse, request: HTTPRequest) {
    guard let origin = allowedOrigin(request), !response.headers.contains("Access-Control-Allow-Origin") else { return }
    response.headers.set("Access-Control-Allow-Origin", origin)
    if origin != "*" { response.headers.add("Vary", "Origin") }
    response.headers.set(
      "Access-Control-Expose-Headers",
      "ETag, Content-Range, Content-Length, Location, Upload-Offset, Upload-Length, Upload-Metadata, "
        + "Upload-Defer-Length, Upload-Expires, Upload-Concat, Tus-Resumable, Tus-Version, Tus-Extension, "
        + "Tus-Max-Size, Tus-Checksum-Algorithm, X-Request-Id")
  }
}

/// Adds CORS headers to whatever response a body sink produces.
final class CORSBodySink: HTTPBodySink {
  private let inner: any HTTPBodySink
  private let app: LarderApp
  private let request: HTTPRequest

  init(_ inner: any HTTPBodySink, app: LarderApp, request: HTTPRequest) {
    self.inner = inner
    self.app = app
    self.request = request
  }

  func receive(_ chunk: UnsafeRawBufferPointer) throws {
    do {
      try inner.receive(chunk)
    } catch {
      var response = app.errorResponse(for: error, request: request)
      app.addCORS(to: &response, request: request)
      throw HTTPResponseError(response)
    }
  }

  func finish() throws -> HTTPResponse {
    var response: HTTPResponse
    do {
      response = try inner.finish()
    } catch {
      response = app.errorResponse(for: error, request: request)
    }
    app.addCORS(to: &response, request: request)
    return response
  }

  func cancel() { inner.cancel() }
}
