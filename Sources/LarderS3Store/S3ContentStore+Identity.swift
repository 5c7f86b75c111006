import Foundation
import Larder
internal import LarderS3

/// The store's identities as objects `<prefix>/store-ids/<id>`, beside (not under) `sha256/`.
extension S3ContentStore {
  private var identityPrefix: String { keyPrefix + "store-ids/" }

  package func recordedStoreIdentities() throws -> Set<String> {
    var identities = Set<String>()
    try Self.translating {
      try client.list(prefix: identityPrefix) { identities.insert(String($0.key.dropFirst(identityPrefix.count))) }
    }
    return identities
  }

  package func recordStoreIdentity(_ identity: String) throws {
    try Self.translating { _ = try client.put(.bytes(Array((identity + "\n").utf8)), key: identityPrefix + identity) }
  }

  package func forgetStoreIdentity(_ identity: String) throws {
    try Self.translating { try client.delete(identityPrefix + identity) }
  }
}
