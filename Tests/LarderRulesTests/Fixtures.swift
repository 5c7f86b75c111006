import Foundation
import LarderRules

/// Shared request builders for the rules tests.
enum Fixtures {
  /// 2024-03-15T12:30:45Z, a Friday.
  static let now = Date(timeIntervalSince1970: 1_710_505_845)
  /// 2024-01-01T00:00:00Z.
  static let newYear = Date(timeIntervalSince1970: 1_704_067_200)

  static let alice = RuleAuth(
    uid: "alice",
    token: [
      "admin": .bool(true), "email": .string("alice@example.com"),
      "groups": .list([.string("eng"), .string("ops")]),
    ])

  static func object(
    _ name: String, size: Int64 = 1024, contentType: String = "image/png", detectedContentType: String? = nil,
    metadata: [String: String] = [:], sha256: String? = nil
  ) -> RuleResource {
    // The detected type defaults to the declared one: content that is what it claims.
    RuleResource(
      name: name, bucket: "bkt", size: size, contentType: contentType,
      detectedContentType: detectedContentType ?? contentType, metadata: metadata, md5Hash: "abc",
      sha256: sha256, timeCreated: newYear, updated: newYear, generation: 3, metageneration: 2)
  }

  /// A request with the shape the server sends for each operation: `resource` for an
  /// existing object, `request.resource` for writes that carry one.
  static func request(
    _ op: RuleOperation, _ name: String, uid: String? = nil, token: [String: RuleValue] = [:],
    size: Int64 = 1024, contentType: String = "image/png", detectedContentType: String? = nil,
    stored: RuleResource? = nil, metadata: [String: String] = [:]
  ) -> RuleRequest {
    let incoming = object(
      name, size: size, contentType: contentType, detectedContentType: detectedContentType, metadata: metadata)
    return RuleRequest(
      operation: op, bucket: "bkt", objectName: name, auth: uid.map { RuleAuth(uid: $0, token: token) },
      time: now,
      resource: op == .create || op == .list
        ? nil
        : (stored ?? object(name, size: size, contentType: contentType, detectedContentType: detectedContentType)),
      requestResource: op == .create || op == .update ? incoming : nil)
  }
}
