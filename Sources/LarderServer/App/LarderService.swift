import Foundation
import Larder
import LarderImages
import LarderAuth
import LarderHTTP
import LarderLogging
import Synchronization

/// A running Larder HTTP service: the store, the policy, the endpoints and the server.
///
/// ```swift
/// let service = try LarderService(options: .init(dataDirectory: dir, policy: .allowAll))
/// try service.start()          // service.port is the bound port
/// service.stop()               // graceful: in-flight requests finish, then the catalog closes
/// ```
public final class LarderService: Sendable {
  public struct Options: Sendable {
    public enum Policy: Sendable {
      /// Everything allowed: development only.
      case allowAll
      /// A `storage.rules` file; default deny.
      case rulesFile(URL)
      case custom(any AccessPolicy)
    }

    public var dataDirectory: URL
    /// Where the catalog is; nil: SQLite in the data directory.
    public var catalog: CatalogLocation?
    /// Where committed bytes live; nil: the data directory.
    public var blobs: BlobLocation?
    /// The catalogs and blob stores besides the embedded one that ``catalog`` and ``blobs`` may
    /// name, composed by the program (the `larder` executable passes `[.postgres, .s3]`), so a
    /// program embedding the server alone links neither libpq nor libcurl.
    public var backends: StoreBackends = .embedded
    /// Failure and crash injection in the store, for tests; none in production.
    package var faults = FaultInjector.none
    /// With a PostgreSQL catalog: writer connections at most (``Larder/Configuration/catalogWriters``).
    public var catalogWriters = 8
    public var policy: Policy
    public var http = HTTPServer.Configuration()
    public var maxUploadSize: Int64 = 5 << 30
    public var publicURL: String?
    public var corsOrigins: [String] = ["*"]
    public var uploadExpiry: Duration = .seconds(24 * 3600)
    /// With blobs in S3: how long an append's lease on its upload lasts unrenewed (a node that
    /// dies mid-append keeps others from continuing the upload this long).
    public var uploadLease: Duration = .seconds(10)
    /// PEM, JWKS or Google x509 JSON (`kid` → certificate, for Firebase Auth ID tokens) files with
    /// RS256/ES256 public keys, besides the catalog's HS256 token secret; ``reload()`` re-reads them.
    public var publicKeyFiles: [URL] = []
    public var jwtIssuer: String?
    public var jwtAudience: String?
    /// How long a node trusts what it read of a service account's keys: a revoked key's access
    /// tokens and signed URLs stop working within this.
    public var serviceAccountKeyCacheTTL: Duration = .seconds(5)
    /// How long a repeated `/token` assertion answers the first exchange's token before it is a replay.
    public var assertionRetryWindow: Duration = .seconds(5)
    /// Where refusals and internal errors are logged (standard error unless replaced).
    public var logger = Logger(label: "larder.server")
    /// Image variants on downloads (`width`, `height`, …); nil turns them off (`--image-transforms off`).
    public var images: ImageOptions? = ImageOptions()
    /// Per-identity limits on bytes written and uploads in progress (``WriteQuota``; `.unlimited` turns them off).
    public var quota = WriteQuota()
    /// Webhook deliveries of object-change events (``EventDeliverer``).
    public var events = EventDeliveryOptions()
    /// The buckets the web console offers users (``ServiceContext/consoleBuckets``).
    public var consoleBuckets = ["app"]

    public init(dataDirectory: URL, policy: Policy) {
      self.dataDirectory = dataDirectory
      self.policy = policy
    }
  }

  public let options: Options
  public let larder: Larder
  public let server: HTTPServer
  /// The application the server runs (drive it in process with `HTTPTestDriver`).
  public let app: LarderApp
  /// Where downloads that ask for an image variant wait for the render pool (not on the
  /// engine's workers); nil with images off.
  private let renderRequests: WorkerPool?
  public let context: ServiceContext
  /// The rules policy when serving a rules file (for reload on SIGHUP).
  public let rules: RulesPolicy?
  /// Delivers object-change events to webhooks; nil when `options.events.enabled` is false.
  public let deliverer: EventDeliverer?
  /// The port the server bound, once started (for the deliverer's links).
  private let boundPort = BoundPort()

  private final class BoundPort: Sendable {
    let value = Atomic<Int>(0)
  }
  /// The HS256 key of this store's tokens (the catalog's `token_secret`, see ``tokenSecret(of:)``).
  public let secret: [UInt8]
  /// Verifies bearer tokens; its keys reload with ``reload()``.
  public let authenticator: JWTAuthenticator

  /// Opens the store and builds the server; nothing listens until ``start()``.
  /// - Throws: store, rules (with `file:line:col` diagnostics) or key errors.
  /// `uploads`: the resumable uploads' store on `larder` (tests: one whose statements they count);
  /// by default one made with the options' expiry and lease.
  public init(options: Options, larder: Larder? = nil, uploads: UploadStore? = nil) throws {
    self.options = options
    let larder =
      try larder
      ?? Larder(
        at: options.dataDirectory,
        configuration: .init(
          faults: options.faults, catalog: options.catalog, blobs: options.blobs, backends: options.backends,
          logger: options.logger, catalogWriters: options.catalogWriters))
    self.larder = larder
    secret = try Self.tokenSecret(of: larder)
    let verifier = JWTVerifier(
      hmacSecret: secret, publicKeys: try JWTAuthenticator.loadKeys(options.publicKeyFiles), issuer: options.jwtIssuer,
      audience: options.jwtAudience)
    authenticator = JWTAuthenticator(verifier: verifier, keyFiles: options.publicKeyFiles)
    let policy: any AccessPolicy
    switch options.policy {
    case .allowAll:
      policy = AllowAllPolicy()
      rules = nil
    case .rulesFile(let url):
      let r = try RulesPolicy(file: url)
      policy = r
      rules = r
    case .custom(let p):
      policy = p
      rules = nil
    }
    let accounts = ServiceAccounts(larder: larder, secret: secret, cacheTTL: options.serviceAccountKeyCacheTTL)
    var context = ServiceContext(
      larder: larder, policy: policy, authenticator: ServiceAccountAuthenticator(base: authenticator, accounts: accounts),
      maxUploadSize: options.maxUploadSize, publicURL: options.publicURL, corsOrigins: options.corsOrigins,
      uploadExpiry: options.uploadExpiry, uploadLease: options.uploadLease, logger: options.logger,
      quota: options.quota, uploads: uploads)
    context.serviceAccounts = accounts
    context.assertionRetryWindow = options.assertionRetryWindow
    context.consoleBuckets = options.consoleBuckets
    context.images = options.images.map {
      let perClient =
        $0.rendersPerClient ?? ImageOptions.defaultRendersPerClient(requestThreads: options.http.threadPoolSize)
      return ImageVariants(
        larder: larder, limits: $0.limits,
        pool: RenderPool(threads: $0.renderThreads, queueLength: $0.renderQueue, perClient: perClient))
    }
    self.context = context
    let metrics = Metrics()
    metrics.registerGauge(
      "larder_missing_content_reads", help: "Reads since start that found their content missing from the blob store."
    ) { Double(larder.files.missingContentReadCount) }
    // One store snapshot per scrape for both figures.
    metrics.registerGauges([("larder_objects", "Objects stored."), ("larder_blob_bytes", "Bytes of distinct content stored.")]) {
      guard let statistics = try? larder.statistics() else { return [0, 0] }
      return [Double(statistics.objectCount), Double(statistics.blobBytes)]
    }
    Self.registerCatalogLockTimes(of: larder, in: metrics)
    context.quotas.register(in: metrics)
    // The deliverer builds resources' links as objects.get does: the public URL, else this server.
    // It is told the port, never handed the server: the metrics the server holds hold the deliverer.
    let bound = boundPort
    let publicURL = options.publicURL
    if options.events.enabled, options.events.transport == nil {
      options.logger.info("events: no webhook transport was given, so this node sends no webhooks")
    }
    deliverer =
      options.events.enabled && options.events.transport != nil
      ? EventDeliverer(larder: larder, options: options.events, logger: options.logger) {
        if var base = publicURL, !base.isEmpty {
          while base.hasSuffix("/") { base.removeLast() }
          return base
        }
        return "http://127.0.0.1:\(bound.value.load(ordering: .relaxed))"
      } : nil
    EventMetrics.register(larder: larder, deliverer: deliverer, in: metrics)
    var http = options.http
    // The limit is on content: a Firebase multipart body wraps it in up to this much more.
    if http.maxBodyBytes == nil { http.maxBodyBytes = options.maxUploadSize + FirebaseUploads.maxWrapperBytes }
    let localReads =
      (options.catalog ?? .dataDirectory) == .dataDirectory && (options.blobs ?? .dataDirectory) == .dataDirectory
    // As many as the render pool takes at once (running and queued); more wait their turn here.
    renderRequests = context.images.map { WorkerPool(count: $0.pool.threads + $0.pool.queueLength, name: "render-wait") }
    app = LarderApp(context: context, metrics: metrics, localReads: localReads, renderRequests: renderRequests)
    server = HTTPServer(configuration: http, handler: app, metrics: metrics)
  }

  /// `larder_catalog_lock_held_seconds` (keyed and exclusive writes) and
  /// `larder_catalog_lock_wait_seconds`: how long this process's catalog writes held their locks
  /// (from the grant to COMMIT's return) and waited for them.
  static func registerCatalogLockTimes(of larder: Larder, in metrics: Metrics) {
    @Sendable func series(_ h: CatalogLockTimes.Histogram, _ label: (String, String)?) -> Metrics.HistogramSeries {
      Metrics.HistogramSeries(label: label, counts: h.counts, sum: h.sum, count: h.count)
    }
    metrics.registerHistogram(
      "larder_catalog_lock_held_seconds",
      help: "Catalog write transactions: time from their locks' grant to COMMIT's return, by lock kind.",
      bounds: CatalogLockTimes.bounds
    ) {
      let times = larder.catalogLockTimes()
      return [series(times.keyedHeld, ("writes", "keyed")), series(times.exclusiveHeld, ("writes", "exclusive"))]
    }
    metrics.registerHistogram(
      "larder_catalog_lock_wait_seconds", help: "Catalog write transactions: time waiting for a connection and locks.",
      bounds: CatalogLockTimes.bounds
    ) { [series(larder.catalogLockTimes().waited, nil)] }
  }

  public func start() throws {
    try server.start()
    context.listening.set(host: options.http.host, port: server.boundPort)
    boundPort.value.store(server.boundPort, ordering: .relaxed)
    deliverer?.start()
  }

  /// Re-reads the rules file and the public key files (what `larder serve` does on SIGHUP). A
  /// file that fails to load keeps what was loaded before. One line per thing, for the log.
  ///
  ///     for line in service.reload() { print(line) }   // "larder: rules reloaded", …
  public func reload() -> [String] {
    var lines: [String] = []
    if let rules {
      if let problem = rules.reload() {
        lines.append("larder: rules reload failed, keeping the previous rules:\n\(problem)")
      } else {
        lines.append("larder: rules reloaded")
      }
    }
    if !options.publicKeyFiles.isEmpty {
      if let problem = authenticator.reloadKeys() {
        lines.append("larder: public key reload failed, keeping the previous keys: \(problem)")
      } else {
        lines.append("larder: public keys reloaded")
      }
    }
    return lines
  }

  public var port: Int { server.boundPort }

  /// Stops accepting, lets in-flight requests finish up to `timeout`, then checkpoints the
  /// catalog's write-ahead log; true if every request finished.
  @discardableResult
  public func stop(timeout: Duration = .seconds(10)) -> Bool {
    let clean = server.shutdown(timeout: timeout)
    renderRequests?.stop()
    deliverer?.stop()
    // Shared-mode removals queued by finished uploads (pieces, multipart aborts) go out first.
    context.uploads.waitForCleanup()
    // The background MD5 pass must not outlive the process's OpenSSL (it resumes at next start).
    larder.files.md5Backfill?.stop()
    // Another process (the CLI) may be using the catalog: a busy checkpoint is not an error.
    try? larder.catalog.checkpoint()
    return clean
  }

  /// The HS256 key of `larder`'s tokens: the catalog's `token_secret` row, made on first need
  /// from the data directory's legacy `secret` file when there is one (so tokens issued before
  /// the key moved to the catalog stay valid), else from fresh random bytes. The server and
  /// `larder token` both take it from here.
  public static func tokenSecret(of larder: Larder) throws -> [UInt8] {
    try larder.tokenSecret(adopting: {
      try SecretFile.loadIfPresent(at: larder.directory.appendingPathComponent("secret"))
    })
  }

  /// A development token signed with this store's secret.
  public func developmentToken(uid: String, ttl: TimeInterval = 3600) -> String {
    TokenIssuer(secret: secret).issue(uid: uid, ttl: ttl)
  }
}
