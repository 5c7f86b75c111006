/// A bucket and object name, validated once (``ObjectName``) where they enter: the store's
/// `ObjectPath` methods take it without checking again.
///
/// ```swift
/// let path = try ObjectPath(bucket: "app", name: "users/u1/avatar.png")
/// let object = try larder.objects.find(path)
/// ```
public struct ObjectPath: Sendable, Hashable, CustomStringConvertible {
  public let bucket: String
  public let name: String

  /// - Throws: ``LarderError/invalidBucket(_:reason:)``, ``LarderError/invalidName(_:reason:)``.
  public init(bucket: String, name: String) throws(LarderError) {
    try ObjectName.validateBucket(bucket)
    try ObjectName.validateName(name)
    self.bucket = bucket
    self.name = name
  }

  public var description: String { "\(bucket)/\(name)" }

  /// By bytes (``Swift/StringProtocol/hasSameBytes(as:)``): the object cache is keyed by paths,
  /// and "café" spelled NFC and NFD are two objects in the catalog.
  public static func == (a: ObjectPath, b: ObjectPath) -> Bool {
    a.name.hasSameBytes(as: b.name) && a.bucket.hasSameBytes(as: b.bucket)
  }

  public func hash(into hasher: inout Hasher) {
    bucket.hashBytes(into: &hasher)
    name.hashBytes(into: &hasher)
  }
}
