import Foundation
import LarderCrypto

/// Where one blob's bytes are: its SHA-256 and its row's *fence*.
///
/// A fence is a number the catalog hands out once and never again (ARCHITECTURE.md, "Fenced
/// deletion"): a writer that uploads to S3 takes a fresh one, so an address a collector condemned
/// is never claimed by a row again, and a DELETE that arrives late cannot remove bytes anyone
/// relies on. Fence 0 is every blob of filesystem content and every S3 blob stored before
/// fences existed; its key is the one those always had, `sha256/ab/cd/<hex>`. Any other fence adds
/// `.<fence>` in decimal: `sha256/ab/cd/<hex>.7`.
public struct BlobAddress: Hashable, Sendable, CustomStringConvertible {
  /// Lower-case hex SHA-256 of the content.
  public let hex: String
  public let fence: Int64

  public init(hex: String, fence: Int64 = 0) {
    self.hex = hex
    self.fence = fence
  }

  /// The key in a bucket (below its prefix); at fence 0 also the path under `blobs/`.
  public var key: String {
    let base = Self.key(forHex: hex)
    return fence == 0 ? base : "\(base).\(fence)"
  }

  public var description: String { key }

  /// The digest's bytes, for the catalog (nil for a malformed hex, which no row has).
  package var sha256: [UInt8] { Hex.decode(hex) ?? [] }

  package init(sha256: [UInt8], fence: Int64) {
    self.init(hex: Hex.encode(sha256), fence: fence)
  }

  /// The fence-0 key of `hex`: `sha256/ab/cd/<hex>`.
  public static func key(forHex hex: String) -> String {
    "sha256/\(hex.prefix(2))/\(hex.dropFirst(2).prefix(2))/\(hex)"
  }

  /// The address of a well-formed key, nil for anything else (a stray the commit path never
  /// makes). A fence is written in canonical decimal (no sign, no leading zero), so one address
  /// has one key.
  public init?(key: String) {
    let parts = key.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count == 4, parts[0] == "sha256" else { return nil }
    let leaf = parts[3]
    let hex = String(leaf.prefix(64))
    let rest = leaf.dropFirst(64)
    guard BlobTreeWalker.isHex(hex, count: 64), parts[1] == hex.prefix(2), parts[2] == hex.dropFirst(2).prefix(2)
    else { return nil }
    var fence: Int64 = 0
    if !rest.isEmpty {
      let digits = rest.dropFirst()
      guard rest.first == ".", let first = digits.first, first != "0", digits.allSatisfy({ $0.isASCII && $0.isNumber }),
        let value = Int64(digits)
      else { return nil }
      fence = value
    }
    self.init(hex: hex, fence: fence)
  }
}
