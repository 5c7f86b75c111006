import Foundation

/// A field of a model that holds another model's id (belongs-to), with what happens to the
/// model holding it when the one it points at is deleted.
///
/// ```swift
/// struct Post: Model {
///   var id: String
///   var authorID: String       // a User's id
///   var editorID: String?      // nullable: nullify needs an optional field
///   static let references = [
///     ModelReference("authorID", to: User.self, onDelete: .cascade),
///     ModelReference("editorID", to: User.self, onDelete: .nullify),
///   ]
/// }
/// try larder.models.delete(User.self, id: "u1")   // u1's posts go too; posts u1 edited keep no editor
/// ```
/// The store keeps it inside the write transaction, on both catalogs:
/// - **save**: a reference's target must exist (saved earlier, or earlier in the same
///   transaction), else ``ModelError/referenceNotFound(type:id:field:targetType:targetID:)``
///   and nothing is saved. A field that is null or missing refers to nothing.
/// - **delete** of a target: every model that points at it with ``DeleteRule/cascade`` is
///   deleted too (and so on, any depth; cycles end, since a model is deleted once), with
///   their `File` attachments, which the collector then releases like any delete. Then, among
///   models that point at any deleted one and are not deleted themselves, a
///   ``DeleteRule/restrict`` refuses the whole delete with
///   ``ModelError/deleteRestricted(type:id:referrerType:referrerID:field:)`` before anything
///   changes, and a ``DeleteRule/nullify`` sets the field to null.
///
/// The rule in force is the one declared when the referring model was last saved (the catalog
/// records it with the reference, so another process's delete honours it without the type).
/// References are recorded when a model is saved: a type that starts declaring one keeps its
/// existing rows unchecked until each is saved again.
public struct ModelReference: Sendable, Hashable {
  /// The field path (as in ``ModelIndex``) of the id: a `String` or `String?` property.
  public let field: String
  /// The ``Model/modelType`` of the models it points at.
  public let targetType: String
  public let onDelete: DeleteRule

  public init<Target: Model>(_ field: String, to target: Target.Type, onDelete: DeleteRule = .restrict) {
    self.field = field
    targetType = Target.modelType
    self.onDelete = onDelete
  }

  init(field: String, targetType: String, onDelete: DeleteRule) {
    self.field = field
    self.targetType = targetType
    self.onDelete = onDelete
  }

  /// The value at `field` (validated) in a body parsed by `JSONSerialization`; nil when the
  /// field is missing or null.
  static func value(at field: String, in body: Any) throws(ModelError) -> Any? {
    _ = try QuerySQL.jsonPath(field)
    var current: Any = body
    for name in field.split(separator: ".") {
      var parts = name.split(separator: "[")
      guard let key = parts.first, let object = current as? [String: Any], let member = object[String(key)]
      else {
        return nil
      }
      current = member
      parts.removeFirst()
      for index in parts {
        guard let i = Int(index.dropLast()), let array = current as? [Any], array.indices.contains(i) else {
          return nil
        }
        current = array[i]
      }
    }
    return current is NSNull ? nil : current
  }
}

/// What deleting a model does to the models that refer to it (``ModelReference``).
public enum DeleteRule: String, Sendable, Hashable, CaseIterable {
  /// The referring model is deleted too.
  case cascade
  /// The referring model's field is set to null (declare the property optional).
  case nullify
  /// The delete is refused while a referring model exists.
  case restrict
}
