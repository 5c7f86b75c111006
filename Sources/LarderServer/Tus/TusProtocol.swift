import Foundation
import Larder
import LarderCrypto
import LarderHTTP

/// The tus 1.0.0 vocabulary: versions, extensions and request-header parsing. Upload errors
/// become statuses in ``APIError``.
enum TusProtocol {
  static let version = "1.0.0"
  static let extensions =
    "creation,creation-with-upload,creation-defer-length,termination,checksum,expiration,concatenation"
  static let checksumAlgorithms = UploadChecksum.supportedAlgorithms.map(\.rawValue).joined(separator: ",")
  static let offsetContentType = "application/offset+octet-stream"

  /// `Upload-Checksum: <algorithm> <base64 digest>`.
  /// - Throws: ``RequestError/badRequest(_:)`` for an unsupported algorithm or a malformed digest.
  static func parseChecksum(_ value: String?) throws -> UploadChecksum? {
    guard let value else { return nil }
    let parts = value.trimmingCharacters(in: .whitespaces).split(
      separator: " ", omittingEmptySubsequences: true)
    guard parts.count == 2 else { throw badRequest("Upload-Checksum must be '<algorithm> <base64 digest>'") }
    guard let algorithm = DigestAlgorithm(rawValue: String(parts[0]).lowercased()),
      UploadChecksum.supportedAlgorithms.contains(algorithm)
    else {
      throw badRequest(
        "checksum algorithm \(parts[0].prefix(40)) is not supported; use \(checksumAlgorithms)")
    }
    guard let digest = Data(base64Encoded: String(parts[1])), digest.count == algorithm.byteCount else {
      throw badRequest("Upload-Checksum digest is not a base64 \(algorithm.rawValue) digest")
    }
    return UploadChecksum(algorithm: algorithm, digest: Array(digest))
  }

  /// `Upload-Concat`: `partial`, or `final;<url> <url> …` → upload ids of `bucket`.
  static func parseConcat(_ value: String?, bucket: String) throws -> UploadConcat? {
    guard let value else { return nil }
    let trimmed = value.trimmingCharacters(in: .whitespaces)
    if trimmed == "partial" { return .partial }
    guard trimmed.hasPrefix("final;") else {
      throw badRequest("Upload-Concat must be 'partial' or 'final;<urls>'")
    }
    let urls = trimmed.dropFirst(6).split(separator: " ", omittingEmptySubsequences: true)
    guard !urls.isEmpty, urls.count <= 1000 else {
      throw badRequest("Upload-Concat: final needs 1 to 1000 upload URLs")
    }
    let ids = try urls.map { url -> String in
      var path = Substring(url)
      if let scheme = path.range(of: "://") {
        path = path[scheme.upperBound...]
        path = path.firstIndex(of: "/").map { path[$0...] } ?? ""
      }
      let segments = path.split(separator: "/", omittingEmptySubsequences: false)
      guard segments.count >= 3, segments[segments.count - 2] == "uploads",
        (try? PercentEncoding.decode(segments[segments.count - 3])) == bucket,
        UploadStore.isUploadID(String(segments[segments.count - 1]))
      else {
        throw badRequest(
          "Upload-Concat URL \(url.prefix(200).debugDescription) is not an upload of this bucket")
      }
      return String(segments[segments.count - 1])
    }
    return .final(ids)
  }

  static func badRequest(_ message: String) -> RequestError {
    .badRequest(message)
  }
}
