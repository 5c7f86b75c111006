import Foundation

extension ObjectStore {
  /// The buckets that hold at least one object, in byte order (Larder makes buckets on first use).
  public func buckets() throws -> [String] {
    try catalog.read { db in
      try db.rows("SELECT DISTINCT bucket FROM objects ORDER BY bucket").compactMap { $0.string("bucket") }
    }
  }

  /// Makes `destination` an object with the content of `source`, in one write transaction and
  /// without copying a byte: content is addressed, so the copy is a new `files` row on the same
  /// blob (created now, so gc's grace counts from the copy) and an object row.
  ///
  /// `check` runs on the source as read inside the write (its preconditions); `options` turns it
  /// into the destination's metadata. The destination's `ifGenerationMatch` and `admission` are
  /// judged on the row the copy replaces, as for any write.
  /// - Throws: ``LarderError/notFound(bucket:name:)`` for a missing source, what `check`,
  ///   `options` or `admission` throw, ``LarderError/preconditionFailed(_:)``.
  public func copy(
    from source: ObjectPath, to destination: ObjectPath, check: (StoredObject) throws -> Void = { _ in },
    options: (StoredObject) throws -> ObjectWriteOptions, admission: (any ObjectAdmission)? = nil
  ) throws -> StoredObject {
    if admission?.readsMD5 == true, let found = try find(source), found.file.md5.isEmpty {
      _ = try files.withMD5(found.file)
    }
    return try catalog.write(releasingReserve: false) { db in
      guard let object = try Self.fetch(db: db, bucket: source.bucket, name: source.name) else {
        throw LarderError.notFound(bucket: source.bucket, name: source.name)
      }
      try check(object)
      let options = try options(object)
      try options.validate()
      let now = Date.nowInMilliseconds
      let id = FileStore.newIdentifier()
      let filename = options.filename.flatMap(FileStore.cleanFilename) ?? object.file.filename
      try db.execute(
        """
        INSERT INTO files(id, blob_sha256, size, md5, filename, content_type, declared_content_type, quarantined, created_at)
        SELECT ?, blob_sha256, size, md5, ?, content_type, declared_content_type, quarantined, ? FROM files WHERE id = ?
        """, [id, filename, now, object.file.id])
      let source = object.file
      let file = File(
        id: id, sha256: source.sha256, size: source.size, md5: source.md5, contentType: source.contentType,
        declaredContentType: source.declaredContentType, filename: filename, createdAt: now,
        crc32c: source.crc32c)
      return try Self.insert(
        db: db, bucket: destination.bucket, name: destination.name, file: file, options: options,
        admission: admission)
    }
  }
}
