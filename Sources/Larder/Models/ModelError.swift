import Foundation

/// Failures specific to models and queries, with a stable ``code``.
///
/// A model that refers to a `File` missing from the store fails with
/// ``LarderError/fileNotFound(id:)`` instead, the same error the rest of Larder uses.
public enum ModelError: Error, Sendable, Equatable, CustomStringConvertible {
  /// A field path that is not `name(.name|[index])*` with names of letters, digits and `_`.
  case invalidFieldPath(String)
  /// `modelType` is empty or contains a NUL character.
  case invalidModelType(String)
  case emptyIdentifier(type: String)
  case encodingFailed(type: String, message: String)
  /// A stored body no longer decodes as the type (the type changed since it was saved).
  case decodingFailed(type: String, id: String, message: String)
  case invalidQuery(String)
  /// A saved model's reference (``ModelReference``) names a model that does not exist; nothing
  /// is saved.
  case referenceNotFound(type: String, id: String, field: String, targetType: String, targetID: String)
  /// A reference field holds something other than an id string or null.
  case invalidReference(type: String, id: String, field: String)
  /// The model cannot be deleted: `referrer` points at it with ``DeleteRule/restrict``. Nothing
  /// is deleted.
  case deleteRestricted(type: String, id: String, referrerType: String, referrerID: String, field: String)
  /// One end of a ``ModelRelation`` link does not exist; nothing is linked.
  case linkEndNotFound(relation: String, type: String, id: String)
  /// An imported `File`'s bytes are not what it says: the store holds (or the bundle brings)
  /// content with another SHA-256 or size for that id. Nothing is imported.
  case fileContentMismatch(id: String, expected: String, actual: String)
  /// A model bundle (``ModelStore/exportBundle(type:_:)``) that cannot be read: its line, why.
  case invalidBundle(line: Int, reason: String)

  public var code: String {
    switch self {
    case .invalidFieldPath: "invalid-field-path"
    case .invalidModelType: "invalid-model-type"
    case .emptyIdentifier: "empty-identifier"
    case .encodingFailed: "encoding-failed"
    case .decodingFailed: "decoding-failed"
    case .invalidQuery: "invalid-query"
    case .referenceNotFound: "reference-not-found"
    case .invalidReference: "invalid-reference"
    case .deleteRestricted: "delete-restricted"
    case .linkEndNotFound: "link-end-not-found"
    case .fileContentMismatch: "file-content-mismatch"
    case .invalidBundle: "invalid-bundle"
    }
  }

  public var description: String {
    switch self {
    case .invalidFieldPath(let path): "invalid field path '\(path.prefix(100))'"
    case .invalidModelType(let type): "invalid model type name '\(type.prefix(100))'"
    case .emptyIdentifier(let type): "a \(type) cannot be saved with an empty id"
    case .encodingFailed(let type, let message): "cannot encode \(type): \(message)"
    case .decodingFailed(let type, let id, let message): "stored \(type) '\(id)' does not decode: \(message)"
    case .invalidQuery(let message): message
    case .referenceNotFound(let type, let id, let field, let targetType, let targetID):
      "\(type) '\(id.prefix(100))' refers through '\(field)' to \(targetType) '\(targetID.prefix(100))', which does not exist"
    case .invalidReference(let type, let id, let field):
      "\(type) '\(id.prefix(100))': reference field '\(field)' must hold an id string or null"
    case .deleteRestricted(let type, let id, let referrerType, let referrerID, let field):
      "\(type) '\(id.prefix(100))' cannot be deleted: \(referrerType) '\(referrerID.prefix(100))' refers to it through '\(field)' (restrict)"
    case .linkEndNotFound(let relation, let type, let id):
      "cannot link '\(relation.prefix(100))': \(type) '\(id.prefix(100))' does not exist"
    case .fileContentMismatch(let id, let expected, let actual):
      "file \(id.prefix(100)): its bytes do not match: expected \(expected), found \(actual)"
    case .invalidBundle(let line, let reason): "model bundle, line \(line): \(reason)"
    }
  }
}
