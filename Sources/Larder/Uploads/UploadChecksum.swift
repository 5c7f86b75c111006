import Foundation
import LarderCrypto

/// A client's checksum for one append (`Upload-Checksum: sha1 <base64>`).
public struct UploadChecksum: Sendable, Equatable {
  public let algorithm: DigestAlgorithm
  public let digest: [UInt8]

  public init(algorithm: DigestAlgorithm, digest: [UInt8]) {
    self.algorithm = algorithm
    self.digest = digest
  }

  /// The algorithms an append may be checked with, in the order servers advertise them.
  public static let supportedAlgorithms: [DigestAlgorithm] = [.sha1, .sha256, .md5]
}
