import Foundation
import Larder

/// The access policy as the store's admission step: a `create` or an `update` of the row the
/// write replaces, judged inside the write on the real size, declared and detected types and digests.
///
/// One step for simple uploads, finished resumable uploads and concatenations; the earlier
/// asks (before reading a byte, on what the client declares) only save work.
struct PolicyAdmission: ObjectAdmission {
  let policy: any AccessPolicy
  let identity: Identity?
  var readsMD5: Bool { policy.readsMD5Hash }
  func admit(_ incoming: IncomingObject, replacing current: StoredObject?) throws {
    let resource = AccessResource(
      bucket: incoming.bucket, name: incoming.name, size: incoming.file.size,
      contentType: incoming.contentType, detectedContentType: incoming.file.contentType,
      metadata: incoming.metadata, md5Hash: incoming.file.md5Base64, sha256: incoming.file.sha256)
    let decision = policy.decide(
      AccessRequest(
        operation: current == nil ? .create : .update, bucket: incoming.bucket, name: incoming.name,
        identity: identity, resource: current.map(AccessResource.init), incoming: resource))
    guard decision.allowed else { throw AccessError.denied(reason: decision.reason) }
  }
}

extension ServiceContext {
  /// The admission step for a write by `identity`.
  func admission(for identity: Identity?) -> PolicyAdmission {
    PolicyAdmission(policy: policy, identity: identity)
  }
}
