import Foundation

/// What a complete snapshot is: written last, so a snapshot without one was never finished.
/// `snapshots/<id>/manifest.json` in the destination, beside `catalog.sqlite`.
public struct BackupManifest: Codable, Sendable, Equatable {
  public var format = 1
  public var id: String
  /// When the catalog snapshot was taken (ISO 8601, UTC).
  public var createdAt: Date
  public var storeID: String
  /// `sqlite`: the catalog is an SQLite catalog file, in rollback-journal mode.
  public var catalogFormat: String
  public var catalogFile: String
  public var catalogSHA256: String
  public var catalogBytes: Int64
  /// The catalog's schema version (its migrations).
  public var schemaVersion: Int
  public var objects: Int64
  public var blobs: Int64
  /// The blobs' bytes.
  public var bytes: Int64
  /// What this run copied (the rest was in the destination already).
  public var copiedBlobs: Int64
  public var copiedBytes: Int64
}

extension BackupManifest {
  static func decode(_ data: Data) throws -> BackupManifest {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    return try decoder.decode(BackupManifest.self, from: data)
  }

  func encoded() throws -> Data {
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .iso8601
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    return try encoder.encode(self) + Data("\n".utf8)
  }
}
