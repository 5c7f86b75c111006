import Foundation
import Synchronization
import Larder
import LarderImages
import LarderHTTP
import LarderLogging

/// What every endpoint shares: the store, who may do what, and the service's limits.
public struct ServiceContext: Sendable {
  public var larder: Larder
  /// The configured policy behind ``AdminIdentityPolicy``, so service accounts pass everywhere.
  public var policy: any AccessPolicy {
    get { admitting }
    set { admitting = AdminIdentityPolicy(newValue) }
  }
  private var admitting: AdminIdentityPolicy
  /// Service accounts' keys and the token secret, for `/token` and V4 signed URLs; nil: neither.
  public var serviceAccounts: ServiceAccounts?
  public var authenticator: any Authenticator
  /// The largest object an upload may create, simple or resumable.
  public var maxUploadSize: Int64
  /// The external base URL (`https://files.example.com`) for absolute `Location`s; nil → relative.
  public var publicURL: String?
  /// Origins allowed by CORS (`*` for any); empty turns CORS off.
  public var corsOrigins: [String]
  /// How long an unfinished resumable upload lives.
  public var uploadExpiry: Duration
  /// The one store of resumable uploads, shared by tus and Firebase's resumable protocol, so
  /// that both take the same per-upload lease.
  public let uploads: UploadStore
  /// Where refusals and internal errors are logged, with each request's id as metadata.
  public var logger: Logger
  /// Image variants on downloads; nil when turned off.
  public var images: ImageVariants?
  /// Per-identity write quotas, charged by every write path (``QuotaLedger``).
  public let quotas: QuotaLedger
  /// How long after an assertion's exchange posting it again answers the same token (a client's
  /// concurrent or retried refresh) rather than a replay refusal.
  public var assertionRetryWindow: Duration = .seconds(5)
  /// Where the server listens, once it does (the default public URL of `/token`'s audience).
  public let listening = ListeningAddress()
  /// The buckets the web console offers a user who is not an admin identity (admins see every
  /// bucket with GCS `buckets.list`); `larder serve --console-buckets`.
  public var consoleBuckets: [String] = ["app"]

  public init(
    larder: Larder, policy: any AccessPolicy, authenticator: any Authenticator, maxUploadSize: Int64 = 5 << 30,
    publicURL: String? = nil, corsOrigins: [String] = ["*"], uploadExpiry: Duration = .seconds(24 * 3600),
    uploadLease: Duration = .seconds(10), logger: Logger = Logger(label: "larder.server"),
    quota: WriteQuota = WriteQuota(), uploads: UploadStore? = nil
  ) {
    self.larder = larder
    admitting = AdminIdentityPolicy(policy)
    self.authenticator = authenticator
    self.maxUploadSize = maxUploadSize
    self.publicURL = publicURL
    self.corsOrigins = corsOrigins
    self.uploadExpiry = uploadExpiry
    self.uploads = uploads ?? UploadStore(larder: larder, expiry: uploadExpiry, lease: uploadLease)
    quotas = QuotaLedger(quota, uploads: self.uploads)
    self.logger = logger
  }

  /// The stored object as the early ask sees it: an MD5 not computed yet is unknown (the ask
  /// is decided again inside the write, where it is computed), never read from the whole blob
  /// on the request thread before the body is even accepted.
  static func asKnownNow(_ object: StoredObject) -> AccessResource {
    var resource = AccessResource(object)
    if object.file.md5.isEmpty { resource.unknownFields.insert(.md5Hash) }
    return resource
  }

  /// `object` as the policy sees it, with its MD5 computed now if the policy reads `md5Hash`
  /// and it is not known yet (best effort: an unreadable blob leaves it empty).
  func resource(_ object: StoredObject) -> AccessResource {
    AccessResource(knowingMD5(object))
  }

  /// `object` with its MD5 computed now (and recorded) when the policy reads `md5Hash` and it is
  /// not known yet; as it is otherwise (best effort: an unreadable blob leaves it unknown).
  func knowingMD5(_ object: StoredObject) -> StoredObject {
    guard policy.readsMD5Hash, object.file.md5.isEmpty, let file = try? larder.files.withMD5(object.file) else {
      return object
    }
    var known = object
    known.file = file
    return known
  }

  /// The generation a write must find: the one the policy judged (`seen`), which must also be
  /// the one the client asked for, if it asked.
  /// - Throws: ``LarderError/preconditionFailed(_:)`` when they differ.
  static func pin(asked: Int64?, seen: Int64, operation: String) throws -> Int64 {
    if let asked, asked != seen {
      throw LarderError.preconditionFailed("generation is \(seen), the \(operation) required \(asked)")
    }
    return seen
  }

  /// Asks the policy.
  /// - Throws: ``AccessError/denied(reason:)`` carrying the policy's reason, for the log only.
  func authorize(_ request: AccessRequest) throws(AccessError) {
    let decision = policy.decide(request)
    guard decision.allowed else { throw .denied(reason: decision.reason) }
  }

  /// The bucket of a route's `{bucket}`, decoded and validated.
  func bucket(_ params: RouteParameters) throws -> String {
    let bucket = try params.decoded("bucket")
    try ObjectName.validateBucket(bucket)
    return bucket
  }

  /// The caller; a present but invalid credential is a 401 whatever the route.
  /// A service account's requests are logged with its `client_email` (joined to the access log
  /// by the request id).
  func identity(_ request: HTTPRequest) throws -> Identity? {
    let identity = try authenticator.authenticate(request.headers)
    if let email = identity?.serviceAccount { logServiceAccount(email, request) }
    return identity
  }

  func logServiceAccount(_ email: String, _ request: HTTPRequest, via: String = "access token") {
    logger.info(
      "service account request",
      metadata: [
        "request_id": request.id, "client_email": email, "method": request.method,
        "path": String(request.path.prefix(200)), "credential": via,
      ])
  }
}

/// The address the server bound, set when it starts listening.
public final class ListeningAddress: Sendable {
  private let address = Mutex<(host: String, port: Int)?>(nil)

  public init() {}

  public func set(host: String, port: Int) { address.withLock { $0 = (host, port) } }

  /// The URLs a client on this machine names the server by: `http://HOST:PORT`, with the
  /// loopback names when it listens on loopback or on every address.
  public var urls: [String] {
    guard let (host, port) = address.withLock({ $0 }) else { return [] }
    var hosts = [host.contains(":") ? "[\(host)]" : host]
    if ["0.0.0.0", "::", "127.0.0.1", "::1", "localhost"].contains(host) {
      hosts += ["127.0.0.1", "localhost", "[::1]"]
    }
    return hosts.map { "http://\($0):\(port)" }
  }
}
