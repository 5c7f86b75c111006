import Foundation

/// The outbox's form of an object (`object_events.object`): exactly the bytes `JSONEncoder`
/// with `.sortedKeys` writes for a ``StoredObject`` (dates as seconds since 2001), which every
/// build has written, so rows of older builds and of other nodes read the same. Written in
/// every change's transaction and read for every delivery, so both sides skip Codable
/// (`ObjectChangeOutboxTests` hold the bytes equal to the encoder's).
extension StoredObject {
  /// The stored form, keys in their sorted order.
  /// - Throws: ``JSONWriterError`` for a date that is not finite (as the encoder refuses it).
  package func outboxJSON() throws(JSONWriterError) -> [UInt8] {
    var json = JSONWriter(escapingSlashes: true)
    json.beginObject()
    json.field("bucket", bucket)
    json.field("cacheControl", cacheControl)
    json.field("contentDisposition", contentDisposition)
    json.field("contentEncoding", contentEncoding)
    json.field("contentLanguage", contentLanguage)
    json.field("contentType", contentType)
    json.field("downloadTokens", downloadTokens)
    json.key("file")
    json.beginObject()
    json.field("contentType", file.contentType)
    if let crc32c = file.crc32c { json.field("crc32c", Int64(crc32c)) }
    json.key("createdAt")
    try json.value(file.createdAt.timeIntervalSinceReferenceDate)
    json.field("declaredContentType", file.declaredContentType)
    json.field("filename", file.filename)
    json.field("id", file.id)
    json.field("md5", file.md5)
    json.field("sha256", file.sha256)
    json.field("size", file.size)
    json.endObject()
    json.field("generation", generation)
    json.field("metadata", metadata)
    json.field("metageneration", metageneration)
    json.field("name", name)
    json.key("timeCreated")
    try json.value(timeCreated.timeIntervalSinceReferenceDate)
    json.key("updated")
    try json.value(updated.timeIntervalSinceReferenceDate)
    json.endObject()
    return json.bytes
  }

  /// An object from its stored form, whichever build wrote it.
  /// - Throws: `JSONDecoder`'s error for text that is not a stored object.
  package static func fromOutboxJSON(_ text: String) throws -> StoredObject {
    var text = text
    if let object = text.withUTF8({ StoredObject(outboxJSON: $0) }) { return object }
    return try JSONDecoder().decode(StoredObject.self, from: Data(text.utf8))
  }

  /// Reads the stored form without Codable: any key order, unknown keys skipped, `null` for an
  /// absent optional; nil for anything else (a missing field, another type), which
  /// ``fromOutboxJSON(_:)`` hands to `JSONDecoder`.
  package init?(outboxJSON utf8: UnsafeBufferPointer<UInt8>) {
    var json = JSONReader(utf8)
    var bucket: String?
    var name: String?
    var contentType: String?
    var generation: Int64?
    var metageneration: Int64?
    var metadata: [String: String]?
    var downloadTokens: [String]?
    var timeCreated: Double?
    var updated: Double?
    var cacheControl: String?
    var contentDisposition: String?
    var contentEncoding: String?
    var contentLanguage: String?
    var file: File?
    let read = json.members { key, json in
      switch key {
      case "bucket": return JSONReader.keep(json.string(), in: &bucket)
      case "name": return JSONReader.keep(json.string(), in: &name)
      case "contentType": return JSONReader.keep(json.string(), in: &contentType)
      case "generation": return JSONReader.keep(json.int64(), in: &generation)
      case "metageneration": return JSONReader.keep(json.int64(), in: &metageneration)
      case "timeCreated": return JSONReader.keep(json.double(), in: &timeCreated)
      case "updated": return JSONReader.keep(json.double(), in: &updated)
      case "cacheControl": return json.null() || JSONReader.keep(json.string(), in: &cacheControl)
      case "contentDisposition": return json.null() || JSONReader.keep(json.string(), in: &contentDisposition)
      case "contentEncoding": return json.null() || JSONReader.keep(json.string(), in: &contentEncoding)
      case "contentLanguage": return json.null() || JSONReader.keep(json.string(), in: &contentLanguage)
      case "metadata":
        var entries: [String: String] = [:]
        guard
          json.members({ key, json in
            guard let value = json.string() else { return false }
            entries[key] = value
            return true
          })
        else { return false }
        metadata = entries
      case "downloadTokens":
        var tokens: [String] = []
        guard
          json.elements({ json in
            guard let token = json.string() else { return false }
            tokens.append(token)
            return true
          })
        else { return false }
        downloadTokens = tokens
      case "file":
        file = File(outboxJSON: &json)
        return file != nil
      default: return json.skip()
      }
      return true
    }
    guard read, json.atEnd(), let bucket, let name, let contentType, let generation, let metageneration,
      let metadata, let downloadTokens, let timeCreated, let updated, let file
    else { return nil }
    self.init(
      bucket: bucket, name: name, file: file, generation: generation, metageneration: metageneration,
      contentType: contentType, metadata: metadata, downloadTokens: downloadTokens,
      cacheControl: cacheControl,
      contentDisposition: contentDisposition, contentEncoding: contentEncoding,
      contentLanguage: contentLanguage,
      timeCreated: Date(timeIntervalSinceReferenceDate: timeCreated),
      updated: Date(timeIntervalSinceReferenceDate: updated))
  }
}

extension File {
  /// The `file` member of the outbox's form; nil for anything ``StoredObject/init(outboxJSON:)`` should not trust.
  fileprivate init?(outboxJSON json: inout JSONReader) {
    var id: String?
    var sha256: String?
    var size: Int64?
    var md5: String?
    var contentType: String?
    var createdAt: Double?
    var declaredContentType: String?
    var filename: String?
    var crc32c: UInt32?
    let read = json.members { key, json in
      switch key {
      case "id": return JSONReader.keep(json.string(), in: &id)
      case "sha256": return JSONReader.keep(json.string(), in: &sha256)
      case "size": return JSONReader.keep(json.int64(), in: &size)
      case "md5": return JSONReader.keep(json.string(), in: &md5)
      case "contentType": return JSONReader.keep(json.string(), in: &contentType)
      case "createdAt": return JSONReader.keep(json.double(), in: &createdAt)
      case "declaredContentType":
        return json.null() || JSONReader.keep(json.string(), in: &declaredContentType)
      case "filename": return json.null() || JSONReader.keep(json.string(), in: &filename)
      case "crc32c":
        return json.null() || JSONReader.keep(json.int64().flatMap(UInt32.init(exactly:)), in: &crc32c)
      default: return json.skip()
      }
    }
    guard read, let id, let sha256, let size, let md5, let contentType, let createdAt else { return nil }
    self.init(
      id: id, sha256: sha256, size: size, md5: md5, contentType: contentType,
      declaredContentType: declaredContentType,
      filename: filename, createdAt: Date(timeIntervalSinceReferenceDate: createdAt), crc32c: crc32c)
  }
}
