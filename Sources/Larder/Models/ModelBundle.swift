import Foundation
import LarderCrypto

/// A model type's records with everything an import into an empty store needs: the type's
/// reference rules and the bytes of every attached file. JSON Lines, one object per line, so
/// both ends stream it (a file's bytes go as base64 chunks of at most ``chunkSize`` bytes):
///
/// ```
/// {"bundle":"larder-models","version":1,"type":"Photo","rules":[{"field":"albumID","targetType":"Album","onDelete":"cascade"}]}
/// {"file":{"id":"…","sha256":"…","size":123456,"filename":"cat.jpg","declaredContentType":"image/jpeg"}}
/// {"data":"<base64>"}                     … until `size` bytes of that file
/// {"record":{"id":"p1","albumID":"a1","image":{"id":"…","sha256":"…",…}}}
/// {"end":{"files":1,"records":1}}
/// ```
/// Files come before the records that attach them; each is listed once however many records
/// share it. ``ModelStore/importBundle(type:from:)`` checks every file's SHA-256 and size against
/// its bytes, and every reference against the records the store holds (the bundle's among
/// them), and saves the records in one transaction.
public enum ModelBundle {
  static let name = "larder-models"
  static let version = 1
  /// Bytes per `data` line (before base64): lines stay small for any reader.
  public static let chunkSize = 192 * 1024
  /// The longest line an import reads: a record or a chunk, with room to spare.
  static let maxLine = 64 << 20

  static func line(_ object: [String: Any]) throws -> Data {
    var data = try JSONSerialization.data(
      withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
    data.append(0x0A)
    return data
  }

  static func rules(_ rules: [ModelReference]) -> [[String: Any]] {
    rules.sorted { $0.field < $1.field }.map {
      ["field": $0.field, "targetType": $0.targetType, "onDelete": $0.onDelete.rawValue]
    }
  }

  static func rules(from value: Any?, line: Int) throws -> [ModelReference] {
    guard let list = value as? [Any] else {
      throw ModelError.invalidBundle(line: line, reason: "rules must be a list")
    }
    return try list.map { item in
      guard let rule = item as? [String: Any], let field = rule["field"] as? String,
        let target = rule["targetType"] as? String,
        let onDelete = (rule["onDelete"] as? String).flatMap(DeleteRule.init(rawValue:))
      else {
        throw ModelError.invalidBundle(line: line, reason: "a rule needs field, targetType and onDelete")
      }
      return ModelReference(field: field, targetType: target, onDelete: onDelete)
    }
  }
}

/// Reads lines from a byte source a buffer at a time, each at most ``ModelBundle/maxLine``.
public final class LineReader {
  private let read: (Int) throws -> Data
  private var buffer = Data()
  /// Where the next line starts in `buffer`.
  private var start = 0
  private var finished = false
  public private(set) var lineNumber = 0

  /// `read(n)` returns up to `n` bytes, empty at the end.
  public init(read: @escaping (Int) throws -> Data) { self.read = read }

  /// The next line without its newline; nil at the end.
  public func next() throws -> Data? {
    while true {
      // Lines are sliced off a read position, and the buffer compacted only before it grows:
      // many short lines cost one copy per buffer, not one per line.
      if let newline = buffer[start...].firstIndex(of: 0x0A) {
        let line = Data(buffer[start..<newline])
        start = newline + 1
        lineNumber += 1
        return line
      }
      if finished {
        guard start < buffer.endIndex else { return nil }
        defer { (buffer, start) = (Data(), 0) }
        lineNumber += 1
        return Data(buffer[start...])
      }
      guard buffer.endIndex - start <= ModelBundle.maxLine else {
        throw ModelError.invalidBundle(
          line: lineNumber + 1, reason: "a line is longer than \(ModelBundle.maxLine) bytes")
      }
      let more = try read(1 << 20)
      if more.isEmpty {
        finished = true
      } else {
        buffer = Data(buffer[start...]) + more
        start = 0
      }
    }
  }
}

extension ModelStore {
  /// Writes `type`'s records as a bundle (``ModelBundle``), handing it to `write` a line at a
  /// time: the reference rules the catalog recorded for the type, each attached file's bytes,
  /// the records by id.
  public func exportBundle(type: String, _ write: (Data) throws -> Void, files: FileStore) throws {
    _ = try QuerySQL.typeLiteral(type)
    let (rules, rows) = try catalog.read { db in
      let tx = ModelTransaction(db: db, store: self)
      defer { tx.isOpen = false }
      return (
        try tx.recordedRules(of: type),
        try db.rows("SELECT id, body FROM records WHERE type = ? ORDER BY id", [type]).map {
          ($0.string("id") ?? "", $0.string("body") ?? "null")
        }
      )
    }
    try write(
      ModelBundle.line([
        "bundle": ModelBundle.name, "version": ModelBundle.version, "type": type,
        "rules": ModelBundle.rules(rules),
      ]))
    var sent: Set<String> = []
    var records: [[String: Any]] = []
    for (id, body) in rows {
      guard let object = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else {
        throw ModelError.decodingFailed(type: type, id: id, message: "the stored body is not a JSON object")
      }
      records.append(object)
      for found in Self.files(in: object) where sent.insert(found.id).inserted {
        guard let file = try files.file(id: found.id) else { throw LarderError.fileNotFound(id: found.id) }
        var header: [String: Any] = ["id": file.id, "sha256": file.sha256, "size": file.size]
        if let filename = file.filename { header["filename"] = filename }
        if let declared = file.declaredContentType { header["declaredContentType"] = declared }
        try write(ModelBundle.line(["file": header]))
        var pending = Data()
        try files.read(file) { chunk in
          pending.append(contentsOf: chunk)
          while pending.count >= ModelBundle.chunkSize {
            try write(ModelBundle.line(["data": pending.prefix(ModelBundle.chunkSize).base64EncodedString()]))
            pending = Data(pending.dropFirst(ModelBundle.chunkSize))
          }
        }
        if !pending.isEmpty { try write(ModelBundle.line(["data": pending.base64EncodedString()])) }
      }
    }
    for record in records { try write(ModelBundle.line(["record": record])) }
    try write(ModelBundle.line(["end": ["files": sent.count, "records": records.count]]))
  }

  /// Imports a bundle (``ModelBundle``) as records of `type`; returns how many. Each file's
  /// bytes are stored (streaming) and checked against its SHA-256 and size; a file the store
  /// already holds with that id and SHA-256 is kept, any other gets a new id, which the records
  /// that attach it are given. The bundle's rules become the type's, and the records are saved
  /// as ``importDocuments(type:from:)`` saves them, in one transaction. Files stored before a
  /// failure are attached to nothing: `gc` collects them.
  /// - Throws: ``ModelError/invalidBundle(line:reason:)``,
  ///   ``ModelError/fileContentMismatch(id:expected:actual:)``, and the errors of an import.
  @discardableResult
  public func importBundle(type: String, from reader: LineReader, files: FileStore) throws -> Int {
    _ = try QuerySQL.typeLiteral(type)
    func fail(_ reason: String) -> ModelError { .invalidBundle(line: reader.lineNumber, reason: reason) }
    func object(_ line: Data) throws -> [String: Any] {
      guard let parsed = try? JSONSerialization.jsonObject(with: line) as? [String: Any] else {
        throw fail("not a JSON object")
      }
      return parsed
    }
    guard let first = try reader.next() else { throw fail("the bundle is empty") }
    let header = try object(first)
    guard header["bundle"] as? String == ModelBundle.name, header["version"] as? Int == ModelBundle.version
    else {
      throw fail("not a larder-models bundle of version \(ModelBundle.version)")
    }
    guard header["type"] as? String == type else {
      throw fail("the bundle holds \(header["type"] as? String ?? "?") records, not \(type)")
    }
    let rules = try ModelBundle.rules(from: header["rules"], line: reader.lineNumber)
    var replacements: [String: [String: Any]] = [:]
    var records: [Any] = []
    var pendingLine: Data? = nil
    var ended = false
    while let line = try pendingLine ?? reader.next() {
      pendingLine = nil
      let entry = try object(line)
      if let file = entry["file"] as? [String: Any] {
        guard let id = file["id"] as? String, let sha = (file["sha256"] as? String)?.lowercased(),
          sha.count == 64,
          let size = (file["size"] as? NSNumber)?.int64Value, size >= 0
        else { throw fail("a file needs an id, a 64-hex sha256 and a size") }
        let writer = try files.makeWriter()
        let staged: StagedBlob
        do {
          var written: Int64 = 0
          while let next = try reader.next() {
            let chunk = try object(next)
            guard let text = chunk["data"] as? String else {
              pendingLine = next
              break
            }
            guard let bytes = Data(base64Encoded: text) else { throw fail("file \(id): data is not base64") }
            written += Int64(bytes.count)
            guard written <= size else {
              throw ModelError.fileContentMismatch(id: id, expected: "\(size) bytes", actual: "more")
            }
            try writer.write(bytes)
          }
          staged = try writer.finish()
        } catch {
          writer.cancel()
          throw error
        }
        let actual = Hex.encode(staged.sha256)
        guard actual == sha, staged.size == size else {
          staged.discard()
          throw ModelError.fileContentMismatch(
            id: id, expected: "SHA-256 \(sha), \(size) bytes",
            actual: "SHA-256 \(actual), \(staged.size) bytes")
        }
        if let existing = try files.file(id: id), existing.sha256 == sha {
          staged.discard()
          continue
        }
        let stored = try files.commit(
          staged, filename: file["filename"] as? String,
          declaredContentType: file["declaredContentType"] as? String)
        let encoded = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(stored))
        replacements[id] = encoded as? [String: Any]
      } else if let record = entry["record"] {
        // Members only: the record itself is never taken for a File.
        records.append(
          (record as? [String: Any])?.mapValues { Self.replacingFiles(in: $0, replacements) } ?? record)
      } else if let end = entry["end"] as? [String: Any] {
        guard end["records"] as? Int == records.count else {
          throw fail("the bundle says \(end["records"] ?? "?") records and holds \(records.count)")
        }
        ended = true
        break
      } else {
        throw fail("expected a file, data, record or end line")
      }
    }
    guard ended else { throw fail("the bundle ends early (no end line): it was cut short") }
    return try importParsed(type: type, try Self.documents(records), rules: rules)
  }

  /// `value` with every `File`-shaped object whose id `replacements` names replaced by its new form.
  static func replacingFiles(in value: Any, _ replacements: [String: [String: Any]]) -> Any {
    guard !replacements.isEmpty else { return value }
    if let object = value as? [String: Any] {
      if let id = object["id"] as? String, object["sha256"] is String, object["size"] is NSNumber,
        let replacement = replacements[id]
      {
        return replacement
      }
      return object.mapValues { replacingFiles(in: $0, replacements) }
    }
    if let array = value as? [Any] { return array.map { replacingFiles(in: $0, replacements) } }
    return value
  }
}
