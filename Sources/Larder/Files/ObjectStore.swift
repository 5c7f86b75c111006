import Foundation
import LarderCrypto

/// Objects: `bucket/name` → `File`, with Firebase Storage's metadata.
///
/// ```swift
/// let object = try larder.objects.put(bucket: "app", name: "users/u1/avatar.png", data: png)
/// let page = try larder.objects.list(bucket: "app", prefix: "users/", delimiter: "/")
/// ```
///
/// A class: every request reaches it through ``Larder/objects``, and a struct of reference
/// fields is copied (each retained and released) on every such access.
public final class ObjectStore: Sendable {
  let catalog: Catalog
  let files: FileStore
  /// Rows looked up lately, served while the catalog is unchanged (see ``ObjectCache``).
  let cache = ObjectCache()

  init(catalog: Catalog, files: FileStore) {
    self.catalog = catalog
    self.files = files
  }

  /// The most custom metadata an object may carry, keys and values together.
  public static let maxMetadataBytes = 8 * 1024

  /// Publishes staged content under `bucket/name`, replacing any previous content.
  ///
  /// `admission`, when given, is asked inside the write, about the row being replaced.
  /// - Throws: ``LarderError/invalidName(_:reason:)``, ``LarderError/preconditionFailed(_:)``,
  ///   what `admission` throws, I/O errors.
  public func put(
    bucket: String, name: String, staged: StagedBlob, options: ObjectWriteOptions = .init(),
    admission: (any ObjectAdmission)? = nil
  ) throws -> StoredObject {
    try put(ObjectPath(bucket: bucket, name: name), staged: staged, options: options, admission: admission)
  }

  /// ``put(bucket:name:staged:options:admission:)`` at a path validated already.
  public func put(
    _ path: ObjectPath, staged: StagedBlob, options: ObjectWriteOptions = .init(),
    admission: (any ObjectAdmission)? = nil
  ) throws -> StoredObject {
    try put(path, staged: staged, options: options, admission: admission, alsoIn: { _ in })
  }

  /// ``put(_:staged:options:admission:)`` replacing exactly the row a request read and judged
  /// already (`expecting`), without reading it again: the row is written only if it is still
  /// that generation and metageneration (and the admission step is asked only if it was not
  /// answered on that row already, ``JudgedObject/admitted``). If the row changed meanwhile,
  /// the write reads the new one and asks `admission` about it, as an unjudged write does.
  /// - Throws: as ``put(bucket:name:staged:options:admission:)``.
  public func put(
    _ path: ObjectPath, staged: StagedBlob, options: ObjectWriteOptions = .init(), expecting: JudgedObject,
    admission: (any ObjectAdmission)? = nil
  ) throws -> StoredObject {
    try put(path, staged: staged, options: options, admission: admission, expecting: expecting, alsoIn: { _ in })
  }

  /// ``put(bucket:name:staged:options:admission:)`` that also runs `alsoIn` in the same write
  /// transaction (a resumable upload marks itself completed with the object it became), which
  /// is keyed by the content, the name and `keys` (what `alsoIn` changes: ``WriteKey``).
  func put(
    _ path: ObjectPath, staged: StagedBlob, options: ObjectWriteOptions,
    admission: (any ObjectAdmission)? = nil, expecting: JudgedObject? = nil, keys: [WriteKey] = [],
    alsoIn: (Database) throws -> Void
  ) throws -> StoredObject {
    let (bucket, name) = (path.bucket, path.name)
    try options.validate()
    var expecting = expecting
    if let admission, admission.readsMD5, expecting?.admitted != true {
      // Computed outside the write lock; the current object's is recorded on its blob row, where
      // the admission step's read inside the write finds it.
      _ = try staged.computeMD5()
      if let current = try expecting.map({ $0.current }) ?? find(path), current.file.md5.isEmpty {
        let file = try files.withMD5(current.file)
        expecting?.current?.file = file
      }
    }
    return try files.commit(
      staged, filename: options.filename ?? Self.lastSegment(name), declaredContentType: options.declaredContentType,
      keys: [.object(bucket: bucket, name: name)] + keys
    ) { db, file in
      let object = try Self.insert(
        db: db, bucket: bucket, name: name, file: file, options: options, admission: admission,
        expecting: expecting)
      try alsoIn(db)
      return object
    }
  }

  /// Stores `data` under `bucket/name`.
  public func put(bucket: String, name: String, data: Data, options: ObjectWriteOptions = .init(), sizeLimit: Int64? = nil)
    throws -> StoredObject
  {
    let path = try ObjectPath(bucket: bucket, name: name)
    let writer = try files.makeWriter(options: .init(sizeLimit: sizeLimit))
    try writer.write(data)
    return try put(path, staged: try writer.finish(), options: options)
  }

  /// Writes the object row for a freshly committed file; runs inside ``FileStore/commit``.
  ///
  /// With `expecting`, the row is written only where it is still the one judged (one
  /// conditional statement, no read); where it changed, as without.
  static func insert(
    db: Database, bucket: String, name: String, file: File, options: ObjectWriteOptions,
    admission: (any ObjectAdmission)? = nil, expecting: JudgedObject? = nil
  ) throws -> StoredObject {
    let incoming = IncomingObject(
      bucket: bucket, name: name, contentType: options.contentType, file: file, metadata: options.metadata)
    if let expecting, (options.ifGenerationMatch ?? expecting.current?.generation ?? 0)
      == (expecting.current?.generation ?? 0)
    {
      let current = expecting.current
      if !expecting.admitted, let admission { try admission.admit(incoming, replacing: current) }
      let object = newObject(bucket: bucket, name: name, file: file, options: options, replacing: current)
      // A row that is not the judged one (replaced, changed, or there when none was) is left as
      // it is by this statement: then `changes` is 0 and the write goes the long way below.
      try db.execute(
        upsert + " WHERE objects.generation = ? AND objects.metageneration = ?",
        try values(object) + [current?.generation ?? -1, current?.metageneration ?? -1])
      if db.changes == 1 {
        try recordEvents(replacing: current, with: object, db: db)
        return object
      }
    }
    // The generation this write replaces: its `deleted` event precedes the new one's `finalized`.
    let current = try Self.fetch(db: db, bucket: bucket, name: name)
    let currentGeneration = current?.generation
    if let expected = options.ifGenerationMatch, expected != (currentGeneration ?? 0) {
      throw LarderError.preconditionFailed(
        "generation is \(currentGeneration ?? 0), the write required \(expected)")
    }
    // Judged on the row this transaction replaces: nothing can change it in between.
    try admission?.admit(incoming, replacing: current)
    let object = newObject(bucket: bucket, name: name, file: file, options: options, replacing: current)
    try db.execute(upsert, try values(object))
    try recordEvents(replacing: current, with: object, db: db)
    return object
  }

  /// The row a write makes of `file`, replacing `current`.
  private static func newObject(
    bucket: String, name: String, file: File, options: ObjectWriteOptions, replacing current: StoredObject?
  ) -> StoredObject {
    let now = file.createdAt
    // Generations grow with time (as Firebase's do) and strictly per name.
    let micros = Int64(now.timeIntervalSince1970 * 1_000_000)
    let generation = max(micros, (current?.generation ?? 0) + 1)
    return StoredObject(
      bucket: bucket, name: name, file: file, generation: generation, metageneration: 1,
      contentType: options.contentType, metadata: options.metadata, downloadTokens: [UUID().uuidString.lowercased()],
      cacheControl: options.cacheControl, contentDisposition: options.contentDisposition,
      contentEncoding: options.contentEncoding, contentLanguage: options.contentLanguage,
      timeCreated: now, updated: now)
  }

  /// Writes a new generation's row over whatever is there (``values(_:)`` are its arguments).
  private static let upsert = """
    INSERT INTO objects(bucket, name, file_id, generation, metageneration, content_type, metadata,
                        download_tokens, cache_control, content_disposition, content_encoding,
                        content_language, created_at, updated_at)
    VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT(bucket, name) DO UPDATE SET
      file_id = excluded.file_id, generation = excluded.generation, metageneration = 1,
      content_type = excluded.content_type, metadata = excluded.metadata,
      download_tokens = excluded.download_tokens, cache_control = excluded.cache_control,
      content_disposition = excluded.content_disposition, content_encoding = excluded.content_encoding,
      content_language = excluded.content_language, created_at = excluded.created_at,
      updated_at = excluded.updated_at
    """

  private static func values(_ object: StoredObject) throws -> [any SQLBindable] {
    [
      object.bucket, object.name, object.file.id, object.generation, object.contentType, try Self.json(object.metadata),
      object.downloadTokens.joined(separator: ","), object.cacheControl, object.contentDisposition,
      object.contentEncoding, object.contentLanguage, object.timeCreated, object.updated,
    ]
  }

  private static func recordEvents(replacing current: StoredObject?, with object: StoredObject, db: Database) throws {
    let now = object.timeCreated
    if let current { try ObjectChangeOutbox.record(.deleted, object: current, time: now, timeDeleted: now, db: db) }
    try ObjectChangeOutbox.record(.finalized, object: object, time: now, db: db)
  }

  /// The object at `bucket/name`.
  /// - Throws: ``LarderError/notFound(bucket:name:)``.
  public func get(bucket: String, name: String) throws -> StoredObject {
    guard let object = try find(bucket: bucket, name: name) else {
      throw LarderError.notFound(bucket: bucket, name: name)
    }
    return object
  }

  /// The object at `bucket/name`, or nil when there is none; any other failure (an invalid
  /// name, a busy or broken catalog) throws rather than passing for absence.
  public func find(bucket: String, name: String) throws -> StoredObject? {
    try find(ObjectPath(bucket: bucket, name: name))
  }

  /// ``find(bucket:name:)`` at a path validated already.
  public func find(_ path: ObjectPath) throws -> StoredObject? { try findMemoized(path).object }

  /// The largest content ``smallContent(of:)`` keeps in memory.
  public static let smallContentLimit: Int64 = 16 * 1024

  /// All of `object`'s content when it is at most ``smallContentLimit`` bytes (nil when larger),
  /// from memory when it was read since the catalog last changed (see ``ObjectCache``), so a
  /// hot small download opens no file. Read from a local file, or streamed from wherever the
  /// blobs live (S3).
  ///
  ///     if let bytes = try larder.objects.smallContent(of: object) { … }
  /// - Throws: what ``FileStore/read(_:range:_:)`` throws; ``LarderError/corruptContent(sha256:)``
  ///   when the stored blob is not the size its row records.
  public func smallContent(of object: StoredObject) throws -> [UInt8]? {
    let file = object.file
    guard file.size <= Self.smallContentLimit else { return nil }
    let (cached, epoch) = cache.content(sha256: file.sha256)
    if let cached { return cached }
    let bytes = [UInt8](try files.data(of: file))
    guard bytes.count == Int(file.size) else { throw LarderError.corruptContent(sha256: file.sha256) }
    cache.storeContent(bytes, sha256: file.sha256, epoch: epoch)
    return bytes
  }

  /// ``find(_:)`` with a memo for values derived from the row (see ``ObjectMemo``).
  /// A cache hit takes no catalog connection: the commit stamp is read first, and a reader is
  /// checked out only for a miss.
  public func findMemoized(_ path: ObjectPath) throws -> (object: StoredObject?, memo: ObjectMemo) {
    let entry = try cache.entry(at: path, stamp: catalog.commitStamp()) { path in
      try catalog.read(snapshot: false) { db in try Self.fetch(db: db, bucket: path.bucket, name: path.name) }
    }
    return (entry.object, entry.memo)
  }

  static func fetch(db: Database, bucket: String, name: String) throws -> StoredObject? {
    try db.row(
      "SELECT o.*, \(File.columns) FROM objects o JOIN files f ON f.id = o.file_id WHERE o.bucket = ? AND o.name = ?",
      [bucket, name]
    ).map(Self.object(row:))
  }

  static func object(row: Row) -> StoredObject {
    let text = row.string("metadata") ?? "{}"
    // Written only by the store from a `[String: String]`: unreadable JSON reads as none.
    let metadata =
      text == "{}" ? [:] : (try? JSONDecoder().decode([String: String].self, from: Data(text.utf8))) ?? [:]
    return StoredObject(
      bucket: row.string("bucket") ?? "", name: row.string("name") ?? "", file: File(row: row),
      generation: row.int("generation") ?? 0, metageneration: row.int("metageneration") ?? 0,
      contentType: row.string("content_type") ?? "application/octet-stream", metadata: metadata,
      downloadTokens: (row.string("download_tokens") ?? "").split(separator: ",").map(String.init),
      cacheControl: row.string("cache_control"), contentDisposition: row.string("content_disposition"),
      contentEncoding: row.string("content_encoding"), contentLanguage: row.string("content_language"),
      timeCreated: row.date("created_at") ?? Date(timeIntervalSince1970: 0),
      updated: row.date("updated_at") ?? Date(timeIntervalSince1970: 0))
  }

  /// Changes an object's metadata and bumps its metageneration.
  /// - Throws: ``LarderError/notFound(bucket:name:)``, ``LarderError/preconditionFailed(_:)``.
  public func update(bucket: String, name: String, patch: ObjectPatch) throws -> StoredObject {
    try update(ObjectPath(bucket: bucket, name: name), patch: patch)
  }

  /// ``update(bucket:name:patch:)`` at a path validated already.
  public func update(_ path: ObjectPath, patch: ObjectPatch) throws -> StoredObject {
    let (bucket, name) = (path.bucket, path.name)
    return try catalog.write(keys: [.object(bucket: bucket, name: name)]) { db in
      guard var object = try Self.fetch(db: db, bucket: bucket, name: name) else {
        throw LarderError.notFound(bucket: bucket, name: name)
      }
      if let expected = patch.ifGenerationMatch, expected != object.generation {
        throw LarderError.preconditionFailed("generation is \(object.generation), the update required \(expected)")
      }
      if let expected = patch.ifMetagenerationMatch, expected != object.metageneration {
        throw LarderError.preconditionFailed("metageneration is \(object.metageneration), the update required \(expected)")
      }
      switch patch.contentType {
      case .none: break
      case .some(.none): object.contentType = "application/octet-stream"
      case .some(.some(let type)):
        guard let clean = FileStore.cleanType(type), clean.contains("/") else {
          throw LarderError.invalidArgument("contentType '\(type.prefix(100))' is not a MIME type")
        }
        object.contentType = clean
      }
      if let value = patch.cacheControl { object.cacheControl = try value.map { try Self.headerValue($0, field: "cacheControl") } }
      if let value = patch.contentDisposition {
        object.contentDisposition = try value.map { try Self.headerValue($0, field: "contentDisposition") }
      }
      if let value = patch.contentEncoding {
        object.contentEncoding = try value.map { try Self.headerValue($0, field: "contentEncoding") }
      }
      if let value = patch.contentLanguage {
        object.contentLanguage = try value.map { try Self.headerValue($0, field: "contentLanguage") }
      }
      if patch.clearMetadata { object.metadata = [:] }
      if let changes = patch.metadata {
        for (key, value) in changes { object.metadata[key] = value }
        try Self.validateMetadata(object.metadata)
      }
      if patch.rotateDownloadToken { object.downloadTokens = [UUID().uuidString.lowercased()] }
      object.metageneration += 1
      object.updated = Date.nowInMilliseconds
      try db.execute(
        """
        UPDATE objects SET metageneration = ?, content_type = ?, metadata = ?, download_tokens = ?,
          cache_control = ?, content_disposition = ?, content_encoding = ?, content_language = ?, updated_at = ?
        WHERE bucket = ? AND name = ?
        """,
        [
          object.metageneration, object.contentType, try Self.json(object.metadata),
          object.downloadTokens.joined(separator: ","), object.cacheControl, object.contentDisposition,
          object.contentEncoding, object.contentLanguage, object.updated, bucket, name,
        ])
      try ObjectChangeOutbox.record(.metadataUpdated, object: object, time: object.updated, db: db)
      return object
    }
  }

  /// Removes the name; the file stays until the collector finds nothing else refers to it.
  /// - Throws: ``LarderError/notFound(bucket:name:)``, ``LarderError/preconditionFailed(_:)``.
  public func delete(bucket: String, name: String, ifGenerationMatch: Int64? = nil) throws {
    try delete(ObjectPath(bucket: bucket, name: name), ifGenerationMatch: ifGenerationMatch)
  }

  /// ``delete(bucket:name:ifGenerationMatch:)`` at a path validated already.
  public func delete(_ path: ObjectPath, ifGenerationMatch: Int64? = nil) throws {
    let (bucket, name) = (path.bucket, path.name)
    try catalog.write(keys: [.object(bucket: bucket, name: name)]) { db in
      guard let object = try Self.fetch(db: db, bucket: bucket, name: name) else {
        throw LarderError.notFound(bucket: bucket, name: name)
      }
      if let expected = ifGenerationMatch, object.generation != expected {
        throw LarderError.preconditionFailed("generation is \(object.generation), the delete required \(expected)")
      }
      try db.execute("DELETE FROM objects WHERE bucket = ? AND name = ?", [bucket, name])
      let now = Date.nowInMilliseconds
      try ObjectChangeOutbox.record(.deleted, object: object, time: now, timeDeleted: now, db: db)
    }
  }

  /// Lists objects in name order, folding names that continue past `delimiter` into `prefixes`.
  ///
  /// Items and prefixes together count towards `maxResults` (1…1000).
  /// - Throws: ``LarderError/invalidArgument(_:)`` for a malformed page token or limit.
  ///
  /// `range` narrows it further (GCS's `startOffset`, `endOffset`, `includeTrailingDelimiter`,
  /// `matchGlob`); page tokens are bound to it.
  ///
  /// With a `matchGlob`, one page examines at most `scanBudget` rows and spends at most
  /// ``listingScanTime`` on them: a filter that skips most rows then answers what matched so
  /// far with a page token placed after the last row examined, as GCS does, so no single
  /// request holds a thread for the whole prefix.
  public func list(
    bucket: String, prefix: String = "", delimiter: String? = nil, maxResults: Int = 1000, pageToken: String? = nil,
    range: ListingRange = .init(), scanBudget: Int = ObjectStore.listingScanBudget
  ) throws -> ObjectListing {
    precondition(scanBudget > 0, "a listing must examine at least one row")
    try ObjectName.validateBucket(bucket)
    guard (1...1000).contains(maxResults) else {
      throw LarderError.invalidArgument("maxResults must be between 1 and 1000")
    }
    if let delimiter, delimiter.isEmpty || delimiter.utf8.count > 16 {
      throw LarderError.invalidArgument("delimiter must be 1 to 16 bytes")
    }
    guard prefix.utf8.count <= ObjectName.maxNameBytes else {
      throw LarderError.invalidArgument("prefix is longer than \(ObjectName.maxNameBytes) bytes")
    }
    // Resume strictly after the last name (or folded prefix) of the previous page.
    var cursor = prefix
    var inclusive = true
    if let start = range.startOffset, Self.bytesPrecede(cursor, start) { cursor = start }
    let scope = [bucket, prefix, delimiter ?? ""] + range.scope
    if let pageToken {
      guard let last = try PageToken.open(pageToken, scope: scope, catalog: catalog),
        last.utf8.starts(with: prefix.utf8)
      else { throw LarderError.invalidArgument("pageToken is not one this server issued for this listing") }
      cursor = last
      inclusive = false
    }
    var upper = prefix + "\u{10FFFF}"
    if let end = range.endOffset, Self.bytesPrecede(end, upper) { upper = end }
    return try catalog.read { db in
      var items: [StoredObject] = []
      var prefixes: [String] = []
      var lastEmitted: String?
      var more = false
      var examined = 0
      let filtered = range.glob != nil
      let deadline = ContinuousClock.now + Self.listingScanTime
      scan: while true {
        let rows = try db.rows(
          """
          SELECT o.*, \(File.columns) FROM objects o JOIN files f ON f.id = o.file_id
          WHERE o.bucket = ? AND o.name \(inclusive ? ">=" : ">") ? AND o.name < ?
          ORDER BY o.name LIMIT ?
          """, [bucket, cursor, upper, 256])
        if rows.isEmpty { break }
        for row in rows {
          let name = row.string("name") ?? ""
          // Bytes, not Characters: "a\u{301}" starts with "a" here, as in SQL's range above.
          guard name.utf8.starts(with: prefix.utf8) else { continue }
          if items.count + prefixes.count == maxResults {
            more = true
            break scan
          }
          // A filter's budget is spent: the token resumes after the last row examined. (Without
          // a filter every row examined is answered, and `maxResults` bounds the page.)
          if filtered && (examined == scanBudget || (examined % 64 == 0 && examined > 0 && ContinuousClock.now > deadline)) {
            more = true
            break scan
          }
          examined += 1
          if let delimiter, let folded = Self.folded(name, prefix: prefix, delimiter: delimiter) {
            prefixes.append(folded)
            if range.includeTrailingDelimiter, folded.hasSameBytes(as: name), range.matches(name) { items.append(Self.object(row: row)) }
            lastEmitted = folded + "\u{10FFFF}"
            // Skip every other name under this prefix.
            cursor = folded + "\u{10FFFF}"
            inclusive = false
            continue scan
          }
          if range.matches(name) { items.append(Self.object(row: row)) }
          lastEmitted = name
          cursor = name
          inclusive = false
        }
        if rows.count < 256 { break }
      }
      let token = try more ? lastEmitted.map { try PageToken.seal($0, scope: scope, db: db) } : nil
      return ObjectListing(prefixes: prefixes, items: items, nextPageToken: token)
    }
  }

  /// Rows one listing page examines at most (see ``list(bucket:prefix:delimiter:maxResults:pageToken:range:scanBudget:)``).
  public static let listingScanBudget = 2_000
  /// Time one listing page spends examining rows at most, checked every 64 rows.
  public static let listingScanTime = Duration.milliseconds(50)

  /// Whether `a` sorts before `b` as UTF-8 bytes (the catalog's order).
  static func bytesPrecede(_ a: String, _ b: String) -> Bool {
    a.utf8.lexicographicallyPrecedes(b.utf8)
  }

  /// `name` up to and including the first `delimiter` after `prefix`, matched as UTF-8 bytes; nil if none.
  static func folded(_ name: String, prefix: String, delimiter: String) -> String? {
    let bytes = Array(name.utf8)
    let needle = Array(delimiter.utf8)
    var i = prefix.utf8.count
    while i + needle.count <= bytes.count {
      if bytes[i..<(i + needle.count)].elementsEqual(needle) {
        return String(decoding: bytes[..<(i + needle.count)], as: UTF8.self)
      }
      i += 1
    }
    return nil
  }

  public static func validateMetadata(_ metadata: [String: String]) throws(LarderError) {
    var total = 0
    for (key, value) in metadata {
      guard !key.isEmpty, key.utf8.count <= 256 else {
        throw .invalidArgument("metadata keys must be 1 to 256 bytes")
      }
      guard !(key + value).unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" }) else {
        throw .invalidArgument("metadata must not contain control characters")
      }
      total += key.utf8.count + value.utf8.count
    }
    guard total <= maxMetadataBytes else {
      throw .invalidArgument("custom metadata is larger than \(maxMetadataBytes) bytes")
    }
  }

  static func headerValue(_ value: String, field: String) throws(LarderError) -> String {
    guard value.utf8.count <= 1024, value.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f }) else {
      throw .invalidArgument("\(field) must be printable and at most 1024 bytes")
    }
    return value
  }

  static func json(_ metadata: [String: String]) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    return String(decoding: try encoder.encode(metadata), as: UTF8.self)
  }

  static func lastSegment(_ name: String) -> String? {
    name.split(separator: "/").last.map(String.init)
  }
}
