import Foundation

/// What happened to an object, with Google Cloud Storage's event semantics.
public enum ObjectChangeKind: String, Sendable, Codable, CaseIterable {
  /// A new object, or a new generation of one (after the `deleted` of the generation it replaces).
  case finalized
  /// A delete, or the generation an overwrite replaces.
  case deleted
  /// A metadata change; no new generation.
  case metadataUpdated

  /// The CloudEvents `type` Google gives it (`google.cloud.storage.object.v1.finalized`).
  public var cloudEventType: String { "google.cloud.storage.object.v1." + rawValue }

  /// Parses a comma-separated list (`finalized,deleted`); empty or nil: every kind.
  /// - Throws: ``LarderError/invalidArgument(_:)`` naming an unknown kind.
  public static func parseList(_ text: String?) throws(LarderError) -> [ObjectChangeKind] {
    guard let text, !text.isEmpty else { return allCases }
    var kinds: [ObjectChangeKind] = []
    for part in text.split(separator: ",", omittingEmptySubsequences: false) {
      let word = part.trimmingCharacters(in: .whitespaces)
      guard let kind = ObjectChangeKind(rawValue: word) else {
        throw .invalidArgument(
          "unknown event kind '\(word.prefix(40))': the kinds are \(allCases.map(\.rawValue).joined(separator: ", "))")
      }
      if !kinds.contains(kind) { kinds.append(kind) }
    }
    return kinds
  }
}
