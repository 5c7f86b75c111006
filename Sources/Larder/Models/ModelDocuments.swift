import Foundation
import LarderCrypto

/// A model type's records as JSON documents, without its Swift type: what `larder models
/// export` and `larder models import` move.
///
/// An import keeps what a typed save keeps, in one write transaction:
/// - every document is an object with a non-empty string `id`, unique in the import;
/// - a `File` in it (an object with a string `id`, a 64-hex `sha256` and a `size`, as `File`
///   encodes) must be a stored file with that SHA-256, and becomes an attachment that keeps the
///   file alive (else ``LarderError/fileNotFound(id:)``);
/// - the references the type declared at its last typed save (field, target type and rule, which
///   the catalog keeps in `model_reference_rules`) are recorded for each document, each target
///   checked to exist
///   (else ``ModelError/referenceNotFound(type:id:field:targetType:targetID:)``).
/// A failure rolls everything back; observers of the type hear of a successful import.
extension ModelStore {
  /// Every record of `type` as a JSON array, ordered by id, one document per line.
  public func exportDocuments(type: String) throws -> Data {
    _ = try QuerySQL.typeLiteral(type)
    var out = Data("[".utf8)
    var first = true
    try catalog.read { db in
      try db.forEachRow("SELECT body FROM records WHERE type = ? ORDER BY id", [type]) { row in
        out.append(contentsOf: Array((first ? "\n" : ",\n").utf8))
        out.append(contentsOf: Array((row.string("body") ?? "null").utf8))
        first = false
      }
    }
    out.append(contentsOf: Array((first ? "]\n" : "\n]\n").utf8))
    return out
  }

  /// Saves (inserts or replaces) the documents of a JSON array as records of `type`; returns
  /// how many. See the type's documentation for what is checked.
  /// - Throws: ``ModelError/invalidQuery(_:)`` for JSON that is not an array of objects with
  ///   unique ids, and the errors of a save.
  @discardableResult
  public func importDocuments(type: String, from json: Data) throws -> Int {
    _ = try QuerySQL.typeLiteral(type)
    let parsed: Any
    do {
      parsed = try JSONSerialization.jsonObject(with: json)
    } catch {
      throw ModelError.invalidQuery("the import is not JSON: \(error.localizedDescription)")
    }
    guard let array = parsed as? [Any] else {
      throw ModelError.invalidQuery("the import must be a JSON array of documents")
    }
    let documents = try Self.documents(array)
    return try importParsed(type: type, documents, rules: nil)
  }

  /// Saves parsed documents as records of `type` in one write transaction; with `rules` (a
  /// bundle's), those become the type's recorded references first.
  func importParsed(type: String, _ documents: [(id: String, object: [String: Any])], rules: [ModelReference]?)
    throws -> Int
  {
    try write { tx in
      if let rules { try tx.replaceRecordedRules(of: type, with: rules) }
      let rules = try tx.recordedRules(of: type)
      let now = Date()
      // All records first, so documents may refer to each other whatever their order.
      for document in documents {
        let body = try JSONSerialization.data(
          withJSONObject: document.object, options: [.sortedKeys, .withoutEscapingSlashes])
        try tx.upsertRecord(type: type, id: document.id, body: String(decoding: body, as: UTF8.self), now: now)
      }
      for document in documents {
        let attachments = try Self.files(in: document.object).enumerated().map { position, found in
          let stored = try tx.db.row("SELECT blob_sha256 FROM files WHERE id = ?", [found.id])?.bytes("blob_sha256")
          guard let stored else { throw LarderError.fileNotFound(id: found.id) }
          guard Hex.encode(stored) == found.sha256.lowercased() else {
            throw ModelError.fileContentMismatch(
              id: found.id, expected: "SHA-256 \(found.sha256.lowercased())", actual: "SHA-256 \(Hex.encode(stored))")
          }
          return Attachment(property: found.property, position: position, fileID: found.id)
        }
        try tx.replaceAttachments(type: type, id: document.id, attachments)
        try tx.replaceReferences(type: type, id: document.id, body: document.object, rules: rules)
      }
      tx.touch(type)
      return documents.count
    }
  }

  /// The documents of a JSON array, each an object with a unique non-empty string `id`.
  static func documents(_ array: [Any]) throws -> [(id: String, object: [String: Any])] {
    var documents: [(id: String, object: [String: Any])] = []
    var seen: Set<String> = []
    for (i, element) in array.enumerated() {
      guard let object = element as? [String: Any] else {
        throw ModelError.invalidQuery("document \(i) is not an object")
      }
      guard let id = object["id"] as? String, !id.isEmpty else {
        throw ModelError.invalidQuery("document \(i) has no string id")
      }
      guard seen.insert(id).inserted else {
        throw ModelError.invalidQuery("id '\(id.prefix(100))' appears twice")
      }
      documents.append((id, object))
    }
    return documents
  }

  /// `File`-shaped objects in a parsed document, with their property paths, in document order
  /// (keys sorted, as the stored body has them).
  static func files(in value: Any, path: [FileDiscovery.Step] = []) -> [(
    property: String, id: String, sha256: String
  )] {
    if let object = value as? [String: Any] {
      if let id = object["id"] as? String, let sha = object["sha256"] as? String, sha.utf8.count == 64,
        sha.allSatisfy(\.isHexDigit), object["size"] is NSNumber, !path.isEmpty
      {
        return [(FileDiscovery.render(path), id, sha)]
      }
      return object.keys.sorted().flatMap { files(in: object[$0]!, path: path + [.key($0)]) }
    }
    if let array = value as? [Any] {
      return array.enumerated().flatMap { files(in: $1, path: path + [.index($0)]) }
    }
    return []
  }
}
