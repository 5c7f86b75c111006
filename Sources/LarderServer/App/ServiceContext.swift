import Foundation
import Larder
import LarderHTTP

/// What every endpoint shares: the store, who may do what, and the service's limits.
public struct ServiceContext: Sendable {
  public var larder: Larder
  public var policy: any AccessPolicy
  public var authenticator: any Authenticator
  /// The largest object an upload may create, simple or resumable.
  public var maxUploadSize: Int64
  /// The external base URL (`https://files.example.com`) for absolute `Location`s; nil → relative.
  public var publicURL: String?
  /// Origins allowed by CORS (`*` for any); empty turns CORS off.
  public var corsOrigins: [String]
  /// How long an unfinished resumable upload lives.
  public var uploadExpiry: Duration

  public init(
    larder: Larder, policy: any AccessPolicy, authenticator: any Authenticator, maxUploadSize: Int64 = 5 << 30,
    publicURL: String? = nil, corsOrigins: [String] = ["*"], uploadExpiry: Duration = .seconds(24 * 3600)
  ) {
    self.larder = larder
    self.policy = policy
    self.authenticator = authenticator
    self.maxUploadSize = maxUploadSize
    self.publicURL = publicURL
    self.corsOrigins = corsOrigins
    self.uploadExpiry = uploadExpiry
  }

  /// Asks the policy about writing `incoming` at its name: a `create`, or an `update` of the
  /// object stored there now. Throws the 403 response when denied.
  func authorizeWrite(_ incoming: AccessResource, identity: Identity?) throws {
    let existing = try larder.objects.find(bucket: incoming.bucket, name: incoming.name)
    try authorize(
      AccessRequest(
        operation: existing == nil ? .create : .update, bucket: incoming.bucket, name: incoming.name,
        identity: identity, resource: existing.map(AccessResource.init), incoming: incoming))
  }

  /// Asks the policy; throws the 403 response when denied.
  func authorize(_ request: AccessRequest) throws {
    let decision = policy.decide(request)
    guard decision.allowed else { throw HTTPResponseError(APIError.forbidden()) }
  }
}

/// An endpoint family mounted under `/v0/b/{bucket}/…` (objects, uploads).
public protocol BucketEndpoint: Sendable {
  /// `rest` is the raw path after `/v0/b/{bucket}/`, split on `/` (e.g. `["o", "a%2Fb"]`).
  func handle(_ request: HTTPRequest, bucket: String, rest: [Substring], identity: Identity?) throws -> HTTPHeadDecision
}
