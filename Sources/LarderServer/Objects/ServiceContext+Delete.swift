import Larder

extension ServiceContext {
  /// Deletes the object at `path` as the caller: the policy judges the stored row (`delete`),
  /// then only that row goes, so a replacement made meanwhile is a 412, never deleted unseen.
  /// The store's delete writes the `deleted` event in the same transaction.
  ///
  /// The one delete by name that requests share (Firebase `DELETE`, the console's folder
  /// delete), so every caller is judged and recorded alike.
  /// - Throws: ``AccessError/denied(reason:)``, ``LarderError/notFound(bucket:name:)``,
  ///   ``LarderError/preconditionFailed(_:)`` when `ifGenerationMatch` (evaluated after the
  ///   policy, so a refused caller learns nothing from it) is not the stored generation.
  func deleteObject(
    _ path: ObjectPath, identity: Identity?, ifGenerationMatch asked: @autoclosure () throws -> Int64? = nil
  ) throws {
    let current = try larder.objects.find(path)
    try authorize(
      AccessRequest(
        operation: .delete, bucket: path.bucket, name: path.name, identity: identity,
        resource: current.map(resource)))
    guard let current else { throw LarderError.notFound(bucket: path.bucket, name: path.name) }
    try larder.objects.delete(
      path,
      ifGenerationMatch: try Self.pin(asked: try asked(), seen: current.generation, operation: "delete"))
  }
}
