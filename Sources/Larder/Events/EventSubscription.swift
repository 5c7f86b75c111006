import Foundation

/// A webhook that object changes are delivered to, in the CloudEvents HTTP binding, signed
/// with its own secret (Standard Webhooks).
public struct EventSubscription: Sendable, Equatable, Codable {
  /// How the CloudEvent travels: `binary` (`ce-*` headers, the resource as the body: what
  /// Google's `functions-framework` is handed by Cloud Functions) or `structured` (one
  /// `application/cloudevents+json` document).
  public enum Mode: String, Sendable, Codable, CaseIterable {
    case binary, structured
  }

  public var id: String
  public var url: String
  public var bucket: String
  /// Only names that start with it (empty: every name).
  public var prefix: String
  public var kinds: [ObjectChangeKind]
  public var mode: Mode
  /// `whsec_` + base64 of the HMAC key: shown once, when the subscription is made.
  public var secret: String
  public var createdAt: Date

  /// The HMAC key the secret carries.
  public var signingKey: [UInt8] {
    [UInt8](Data(base64Encoded: String(secret.dropFirst(Self.secretPrefix.count))) ?? Data())
  }

  static let secretPrefix = "whsec_"

  /// `kinds` as the catalog stores them: `,finalized,deleted,`, so one `LIKE '%,kind,%'` tests one.
  static func storedKinds(_ kinds: [ObjectChangeKind]) -> String { "," + kinds.map(\.rawValue).joined(separator: ",") + "," }

  init(row: Row) {
    id = row.string("id") ?? ""
    url = row.string("url") ?? ""
    bucket = row.string("bucket") ?? ""
    prefix = row.string("prefix") ?? ""
    kinds = (row.string("kinds") ?? "").split(separator: ",").compactMap { ObjectChangeKind(rawValue: String($0)) }
    mode = Mode(rawValue: row.string("mode") ?? "") ?? .binary
    secret = row.string("secret") ?? ""
    createdAt = row.date("created_at") ?? Date(timeIntervalSince1970: 0)
  }

  public init(
    id: String, url: String, bucket: String, prefix: String, kinds: [ObjectChangeKind], mode: Mode, secret: String,
    createdAt: Date
  ) {
    self.id = id
    self.url = url
    self.bucket = bucket
    self.prefix = prefix
    self.kinds = kinds
    self.mode = mode
    self.secret = secret
    self.createdAt = createdAt
  }
}
