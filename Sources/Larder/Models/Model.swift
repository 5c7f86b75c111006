import Foundation

/// An application type saved as a JSON document in the catalog, whose `File` properties keep
/// their files alive.
///
/// ```swift
/// struct User: Model {
///   var id: String
///   var name: String
///   var avatar: File?
///   static let indexes = [ModelIndex("name")]
/// }
/// try larder.models.save(User(id: "u1", name: "Ada", avatar: file))
/// ```
/// The body is `JSONEncoder` output (sorted keys, default strategies: dates are seconds since
/// 2001-01-01), so field paths in queries are the coding keys of that encoding.
public protocol Model: Codable, Sendable {
  /// The name rows of this type are stored under; defaults to the type's name.
  /// Changing it orphans records saved under the old name.
  static var modelType: String { get }
  /// Unique within the type; never empty.
  var id: String { get }
  /// Expression indexes created (if missing) the first time the type is used.
  static var indexes: [ModelIndex] { get }
  /// Fields that hold another model's id, kept valid by the store (``ModelReference``).
  static var references: [ModelReference] { get }
}

extension Model {
  public static var modelType: String { String(describing: Self.self) }
  public static var indexes: [ModelIndex] { [] }
  public static var references: [ModelReference] { [] }
}

/// A declared index over one or more fields of a model type's JSON body.
///
/// It becomes `CREATE INDEX … ON records(json_extract(body, '$.a'), …) WHERE type = '<type>'`,
/// which the planner uses for filters and sorts on those fields of that type.
/// ```swift
/// static let indexes = [ModelIndex("age"), ModelIndex("profile.city", "name")]
/// ```
public struct ModelIndex: Sendable, Hashable {
  /// Field paths, as in ``Field``: `"name"`, `"profile.city"`, `"tags[0]"`.
  public let fields: [String]

  public init(_ fields: String...) { self.fields = fields }
  public init(fields: [String]) { self.fields = fields }
}

/// One `File` reference of a saved model, as the `attachments` table holds it.
public struct Attachment: Sendable, Hashable {
  /// Where the file sits in the model's encoded form: `"avatar"`, `"album[2]"`,
  /// `"profile.header"`, `"byName.key"`, `"media.image._0"`.
  public let property: String
  /// Discovery order within the model (0, 1, 2, …).
  public let position: Int
  public let fileID: String

  public init(property: String, position: Int, fileID: String) {
    self.property = property
    self.position = position
    self.fileID = fileID
  }
}
