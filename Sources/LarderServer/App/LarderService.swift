import Foundation
import Larder
import LarderAuth
import LarderHTTP
import LarderLogging

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
    public var policy: Policy
    public var http = HTTPServer.Configuration()
    public var maxUploadSize: Int64 = 5 << 30
    public var publicURL: String?
    public var corsOrigins: [String] = ["*"]
    public var uploadExpiry: Duration = .seconds(24 * 3600)
    /// PEM or JWKS files with RS256/ES256 public keys, besides the data directory's HS256 secret.
    public var publicKeyFiles: [URL] = []
    public var jwtIssuer: String?
    public var jwtAudience: String?
    /// Where refusals and internal errors are logged (standard error unless replaced).
    public var logger = Logger(label: "larder.server")

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
  public let context: ServiceContext
  /// The rules policy when serving a rules file (for reload on SIGHUP).
  public let rules: RulesPolicy?
  /// The HS256 key of this data directory (`secret`).
  public let secret: [UInt8]

  /// Opens the store and builds the server; nothing listens until ``start()``.
  /// - Throws: store, rules (with `file:line:col` diagnostics) or key errors.
  public init(options: Options, larder: Larder? = nil) throws {
    self.options = options
    let larder = try larder ?? Larder(at: options.dataDirectory)
    self.larder = larder
    secret = try SecretFile.loadOrCreate(at: larder.directory.appendingPathComponent("secret"))
    var keys: [VerificationKey] = []
    for file in options.publicKeyFiles {
      let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
      keys += text.contains("-----BEGIN") ? try KeyLoader.pemFile(at: file) : try KeyLoader.jwksFile(at: file)
    }
    let verifier = JWTVerifier(
      hmacSecret: secret, publicKeys: keys, issuer: options.jwtIssuer, audience: options.jwtAudience)
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
    context = ServiceContext(
      larder: larder, policy: policy, authenticator: JWTAuthenticator(verifier: verifier),
      maxUploadSize: options.maxUploadSize, publicURL: options.publicURL, corsOrigins: options.corsOrigins,
      uploadExpiry: options.uploadExpiry, logger: options.logger)
    let metrics = Metrics()
    let catalog = larder.catalog
    metrics.registerGauge("larder_objects", help: "Objects stored.") {
      Double((try? catalog.read { try $0.row("SELECT count(*) AS n FROM objects")?.int("n") }) ?? 0)
    }
    metrics.registerGauge("larder_blob_bytes", help: "Bytes of distinct content stored.") {
      Double((try? catalog.read { try $0.row("SELECT coalesce(sum(size), 0) AS n FROM blobs")?.int("n") }) ?? 0)
    }
    var http = options.http
    if http.maxBodyBytes == nil { http.maxBodyBytes = options.maxUploadSize }
    app = LarderApp(context: context, metrics: metrics)
    server = HTTPServer(configuration: http, handler: app, metrics: metrics)
  }

  public func start() throws { try server.start() }

  public var port: Int { server.boundPort }

  /// Stops accepting, lets in-flight requests finish up to `timeout`, then checkpoints the
  /// catalog's write-ahead log; true if every request finished.
  @discardableResult
  public func stop(timeout: Duration = .seconds(10)) -> Bool {
    let clean = server.shutdown(timeout: timeout)
    // Another process (the CLI) may be using the catalog: a busy checkpoint is not an error.
    try? larder.catalog.checkpoint()
    return clean
  }

  /// A development token signed with this data directory's secret.
  public func developmentToken(uid: String, ttl: TimeInterval = 3600) -> String {
    TokenIssuer(secret: secret).issue(uid: uid, ttl: ttl)
  }
}
