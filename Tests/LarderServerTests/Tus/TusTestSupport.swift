import Foundation
import Larder
import LarderCrypto
import LarderHTTP
import LarderServer

/// The tus tests' name for the one live harness, ``LiveService``.
typealias TusHarness = LiveService

extension LiveService {
  /// A live service with the tus tests' settings (the server's default thread count).
  convenience init(
    policy: LarderService.Options.Policy = .allowAll, maxUploadSize: Int64 = 5 << 30,
    publicURL: String? = nil,
    uploadExpiry: Duration = .seconds(3600), corsOrigins: [String] = ["*"], connectionTimeout: Int = 60
  ) throws {
    try self.init(policy: policy) { options in
      options.http.threadPoolSize = HTTPServer.Configuration().threadPoolSize
      options.http.connectionTimeout = connectionTimeout
      options.maxUploadSize = maxUploadSize
      options.publicURL = publicURL
      options.uploadExpiry = uploadExpiry
      options.corsOrigins = corsOrigins
    }
  }
}

extension InProcessService {
  /// An in-process service with the tus tests' settings.
  convenience init(
    policy: LarderService.Options.Policy = .allowAll, maxUploadSize: Int64 = 5 << 30,
    publicURL: String? = nil, uploadExpiry: Duration = .seconds(3600), corsOrigins: [String] = ["*"]
  ) throws {
    try self.init(policy: policy) { options in
      options.maxUploadSize = maxUploadSize
      options.publicURL = publicURL
      options.uploadExpiry = uploadExpiry
      options.corsOrigins = corsOrigins
    }
  }
}

extension ServiceHarness {
  static var tus: (String, String) { ("Tus-Resumable", "1.0.0") }
  static var stream: (String, String) { ("Content-Type", "application/offset+octet-stream") }

  static func metadata(_ pairs: [(String, String)]) -> String {
    pairs.map { "\($0.0) \(Data($0.1.utf8).base64EncodedString())" }.joined(separator: ",")
  }

  /// POSTs a creation and returns the upload's path (from `Location`).
  func create(length: Int?, name: String? = "file.bin", extra: [(String, String)] = [], token: String? = nil)
    throws
    -> String
  {
    var headers = [Self.tus]
    if let length {
      headers.append(("Upload-Length", String(length)))
    } else {
      headers.append(("Upload-Defer-Length", "1"))
    }
    if let name { headers.append(("Upload-Metadata", Self.metadata([("name", name)]))) }
    if let token { headers.append(("Authorization", "Bearer \(token)")) }
    let r = try request("POST", "/v0/b/app/uploads", headers: headers + extra)
    guard r.status == 201, let location = r["Location"] else {
      throw WireFailure.unexpected("create: \(r.status) \(r.text)")
    }
    return location
  }

  func patch(_ path: String, offset: Int, _ body: [UInt8], extra: [(String, String)] = []) throws
    -> WireResponse
  {
    try request(
      "PATCH", path, headers: [Self.tus, Self.stream, ("Upload-Offset", String(offset))] + extra, body: body)
  }

  func head(_ path: String, extra: [(String, String)] = []) throws -> WireResponse {
    try request("HEAD", path, headers: [Self.tus] + extra)
  }

  func objectBytes(_ name: String) throws -> WireResponse {
    try request("GET", "/v0/b/app/o/\(PercentEncoding.encodeComponent(name))?alt=media")
  }

  /// Upload files present in data/uploads.
  var uploadFiles: [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("uploads").path))
      ?? []).sorted()
  }
}

func checksumHeader(_ algorithm: DigestAlgorithm, _ bytes: [UInt8]) -> (String, String) {
  ("Upload-Checksum", "\(algorithm.rawValue) \(Data(Digest.hash(algorithm, bytes)).base64EncodedString())")
}

/// A policy that denies uploads whose content libmagic calls PNG, and creations named `forbidden*`.
struct NoPNGPolicy: AccessPolicy {
  func decide(_ request: AccessRequest) -> AccessDecision {
    if request.name.hasPrefix("forbidden") { return .deny("name") }
    if let incoming = request.incoming, incoming.detectedContentType == "image/png" { return .deny("png") }
    return .allow("ok")
  }
}
