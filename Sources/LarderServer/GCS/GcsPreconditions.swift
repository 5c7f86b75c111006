import Foundation
import Larder
import LarderHTTP

/// GCS's preconditions on an object's generation and metageneration, from a request's query
/// (`ifGenerationMatch`, …, or a copy's `ifSourceGenerationMatch`, …). A failed one is 412.
///
/// Generation 0 stands for "no live object": `ifGenerationMatch=0` writes only a new object,
/// `ifGenerationNotMatch=0` needs one to exist. Writes check them inside the write transaction, on
/// the row being replaced (``GcsAdmission``); metadata writes on the row the policy judged,
/// which the write is pinned to.
struct GcsPreconditions: Codable, Sendable, Equatable {
  var ifGenerationMatch: Int64?
  var ifGenerationNotMatch: Int64?
  var ifMetagenerationMatch: Int64?
  var ifMetagenerationNotMatch: Int64?

  init() {}

  /// Reads `if{Source}GenerationMatch` and its siblings.
  /// - Throws: ``LarderError/invalidArgument(_:)`` for a value that is not a count.
  init(_ request: HTTPRequest, source: Bool = false) throws {
    let p = source ? "ifSource" : "if"
    ifGenerationMatch = try DecimalCount.query(request, p + "GenerationMatch")
    ifGenerationNotMatch = try DecimalCount.query(request, p + "GenerationNotMatch")
    ifMetagenerationMatch = try DecimalCount.query(request, p + "MetagenerationMatch")
    ifMetagenerationNotMatch = try DecimalCount.query(request, p + "MetagenerationNotMatch")
  }

  var isEmpty: Bool { self == GcsPreconditions() }

  /// Checks them against `object` (nil: there is none).
  /// - Throws: ``LarderError/preconditionFailed(_:)``.
  func check(_ object: StoredObject?) throws(LarderError) {
    let generation = object?.generation ?? 0
    if let g = ifGenerationMatch, g != generation {
      throw .preconditionFailed("ifGenerationMatch: the generation is \(generation), not \(g)")
    }
    if let g = ifGenerationNotMatch, g == generation {
      throw .preconditionFailed("ifGenerationNotMatch: the generation is \(generation)")
    }
    if let m = ifMetagenerationMatch, m != object?.metageneration {
      throw .preconditionFailed(
        "ifMetagenerationMatch: the metageneration is \(object?.metageneration ?? 0), not \(m)")
    }
    if let m = ifMetagenerationNotMatch, let object, m == object.metageneration {
      throw .preconditionFailed("ifMetagenerationNotMatch: the metageneration is \(m)")
    }
  }

  /// The key under which a resumable session's row keeps them until its last byte.
  static let uploadMetadataKey = "gcs.preconditions"

  func stored() throws -> String {
    String(decoding: try JSONEncoder().encode(self), as: UTF8.self)
  }

  static func fromUpload(_ metadata: [String: String]) -> GcsPreconditions {
    metadata[uploadMetadataKey].flatMap { try? JSONDecoder().decode(Self.self, from: Data($0.utf8)) }
      ?? .init()
  }
}

/// The policy's admission step with a GCS request's preconditions, both judged on the row the
/// write replaces, inside the write.
struct GcsAdmission: ObjectAdmission {
  let base: PolicyAdmission
  let conditions: GcsPreconditions
  var readsMD5: Bool { base.readsMD5 }

  func admit(_ incoming: IncomingObject, replacing current: StoredObject?) throws {
    try conditions.check(current)
    try base.admit(incoming, replacing: current)
  }
}
