import Foundation
import Larder
import LarderHTTP
import LarderImages

/// The HTTP application: one route table, one error mapping, one CORS wrapper.
///
/// ```
/// GET  /healthz                      liveness
/// GET  /metrics                      Prometheus text
/// *    /v0/b/{bucket}/o[/{name}]     objects (Firebase Storage REST shape)
/// *    /v0/b/{bucket}/uploads[/{id}] resumable uploads (tus 1.0.0)
/// POST /token                        service accounts' JWT-bearer grant (RFC 7523)
/// GET|HEAD|PUT /{bucket}/{object...}?X-Goog-Signature=…   V4 signed URLs
/// *    /storage/v1/…, /upload/storage/v1/…, /download/storage/v1/…   the GCS JSON API (same objects)
/// GET  /, /console/, /console/{hashed name}   the web console's static files (ConsoleEndpoint)
/// GET  /console/v1/session, POST /console/v1/b/{bucket}/deleteFolder   the console's own calls (ConsoleAPI)
/// GET  /admin/v1/store               the store's counts, admin identities only (StoreEndpoint)
/// *    /admin/v1/events…              object-change events, admin identities only (EventsEndpoint)
/// ```
/// Routes are declared once, here and in each endpoint's `register`; their labels are fixed,
/// so metrics and the access log never grow with what clients send.
public final class LarderApp: HTTPHandler {
  public let context: ServiceContext
  public let router: Router
  public let cors: CORS

  /// `localReads`: the catalog and the content are on this machine (SQLite, the data
  /// directory), so reads wait on nothing but the local disk and may run on the engine's own
  /// threads (``Router/runInline(_:when:)``). `renderRequests`: where downloads asking for an
  /// image variant run (they wait on the render pool), so they hold none of the engine's workers.
  public init(
    context: ServiceContext, metrics: Metrics? = nil, resumableUploads: Bool = true, localReads: Bool = false,
    renderRequests: WorkerPool? = nil
  ) {
    self.context = context
    let objects = ObjectsEndpoint(context: context)
    let uploads = resumableUploads ? TusEndpoint(context: context) : nil
    var cors = CORS(origins: context.corsOrigins)
    cors.expose(ObjectsEndpoint.exposedHeaders)
    cors.allow(ObjectsEndpoint.requestHeaders)
    cors.expose(GcsEndpoint.exposedHeaders)
    cors.allow(GcsEndpoint.requestHeaders)
    if uploads != nil {
      cors.expose(TusEndpoint.exposedHeaders)
      cors.allow(TusEndpoint.requestHeaders)
    }
    cors.expose(["X-Request-Id"])
    cors.allow(["X-Request-Id"])
    let fixed = cors
    self.cors = fixed

    var router = Router()
    let logger = context.logger
    router.errorMapper = { error, request in APIError.response(for: error, request: request, logger: logger) }
    router.finalize = { response, request in fixed.apply(to: &response, request: request) }
    router.add("GET", "/healthz", route: "healthz") { _, _ in .respond(.json(["status": "ok"])) }
    if let metrics {
      router.add("GET", "/metrics", route: "metrics", options: .noHeadFallback) { _, _ in
        .respond(
          HTTPResponse(
            status: 200, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"],
            body: .bytes(Array(metrics.renderPrometheus().utf8))))
      }
    }
    objects.register(in: &router, cors: fixed)
    ConsoleEndpoint(assets: .embedded).register(in: &router)  // the web console (static files)
    ConsoleAPI(context: context).register(in: &router)  // the console's sign-in check and folder delete
    StoreEndpoint(context: context).register(in: &router)  // the store's counts, admin identities only
    EventsEndpoint(context: context).register(in: &router)  // event subscriptions and feed, admin identities only
    GcsEndpoint(context: context).register(in: &router)
    uploads?.register(in: &router, cors: fixed)
    if let accounts = context.serviceAccounts {
      TokenEndpoint(context: context, accounts: accounts).register(in: &router)
      // Last: only requests with X-Goog-Signature, on paths no other route takes.
      SignedURLEndpoint(context: context, accounts: accounts).register(in: &router)
    }
    GcsEndpoint(context: context).registerAtRoot(in: &router)  // after the signed URLs' `/{bucket}/…`
    router.runInline(["healthz"]) { _ in true }
    if localReads {
      // Not while the rules read `md5Hash` (asked per request: rules reload): judging an old
      // large row hashes its whole content first (``ServiceContext/knowingMD5(_:)``).
      let policy = context.policy
      router.runInline(Self.readLabels) { request in
        !policy.readsMD5Hash && !ImageTransform.parameterNames.contains { request.queryValue($0) != nil }
      }
    }
    if let renderRequests {
      router.runOn(Self.downloadLabels, pool: renderRequests) { request in
        ImageTransform.parameterNames.contains { request.queryValue($0) != nil }
      }
    }
    self.router = router
  }

  /// Every download that may serve an image variant (``ImageVariantDownload``).
  static let downloadLabels: Set<String> = ["objects.download", "gcs.objects.download", "signed.get"]

  /// Firebase reads of one object's bytes or metadata: a row, the policy, a local file. (The
  /// GCS reads may first hash an old row's content and record it: those stay on workers.)
  static let readLabels: Set<String> = ["objects.download", "objects.get"]

  public func head(_ request: HTTPRequest) -> HTTPHeadDecision { router.head(request) }

  public func start(_ request: HTTPRequest) -> HTTPHeadStart { router.start(request) }

  public func errorResponse(for error: any Error, request: HTTPRequest) -> HTTPResponse {
    router.errorResponse(for: error, request: request)
  }
}
