import Foundation
import LarderAuth

/// Where `put`, `get`, `ls`, `stat`, `rm` and `cp` act: a data directory opened in this process
/// (``LocalObjectTarget``) or a server reached over the GCS JSON API with a service-account key
/// (``RemoteObjectTarget``). The commands' own logic (folders, recursion, partial files,
/// bucket names, output) is written once above this protocol.
protocol ObjectTarget {
  /// The buckets, with their object counts where they are known cheaply (locally).
  func buckets() throws -> [(name: String, objects: Int?)]
  /// One page of the listing of `bucket` under `prefix`, folded at `delimiter` when given.
  func listPage(bucket: String, prefix: String, delimiter: String?, maxResults: Int, pageToken: String?)
    throws
    -> ListingPage
  /// The object's metadata, with its MD5 and CRC32C.
  func stat(bucket: String, name: String) throws -> ObjectFacts
  /// The object's metadata as stored (no hash computed for it).
  func object(bucket: String, name: String) throws -> ObjectFacts
  /// Stores the local file at `path` (a regular file, or `-`: standard input) as `bucket/name`,
  /// reporting the bytes sent so far.
  func put(
    path: String, bucket: String, name: String, options: PutOptions,
    progress: @escaping @Sendable (Int64) -> Void
  ) throws -> ObjectFacts
  /// Streams `range` of the object's content, of the generation `object` describes, to `body`.
  func read(_ object: ObjectFacts, range: Range<Int64>, _ body: (UnsafeRawBufferPointer) throws -> Void)
    throws
  func delete(bucket: String, name: String) throws
  /// Copies an object on the store's side: no bytes move.
  func copy(from source: (bucket: String, name: String), to destination: (bucket: String, name: String))
    throws
    -> ObjectFacts
}

/// What `put` stores besides the bytes.
struct PutOptions {
  /// nil: the type libmagic detects in the content.
  var contentType: String?
  var metadata: [String: String] = [:]
  var maxSize: Int64?
}

/// One object, as either service describes it.
struct ObjectFacts {
  var bucket: String
  var name: String
  var size: Int64
  var contentType: String
  var generation: Int64
  var metageneration: Int64
  var timeCreated: String?
  var updated: String?
  var md5Hash: String?
  var crc32c: String?
  /// Known locally only (the GCS resource has neither).
  var sha256: String?
  var detectedContentType: String?
  var metadata: [String: String] = [:]
  /// What `--json` prints: the Firebase metadata locally, the GCS object resource from a server.
  var json: () -> JSONValue

  /// `stat`'s lines: every label padded to one width, absent facts left out.
  var statLines: [String] {
    var rows: [(String, String?)] = [
      ("name", "\(bucket)/\(name)"), ("size", String(size)), ("contentType", contentType),
      ("detectedType", detectedContentType), ("sha256", sha256), ("md5Hash", md5Hash), ("crc32c", crc32c),
      ("generation", String(generation)), ("metageneration", String(metageneration)),
      ("timeCreated", timeCreated), ("updated", updated),
    ]
    rows += metadata.sorted { $0.key < $1.key }.map { ("metadata.\($0.key)", $0.value) }
    let width = "metageneration: ".count
    return rows.compactMap { label, value in
      guard let value else { return nil }
      let head = label + ":"
      return head.padding(toLength: max(width, head.count + 1), withPad: " ", startingAt: 0) + value
    }
  }

  /// `ls`'s line: name, size, type, updated, tab-separated.
  var listingLine: String { "\(name)\t\(size)\t\(contentType)\t\(updated ?? "")" }

  /// `put`'s line.
  var storedLine: String {
    "\(bucket)/\(name)  \(size) bytes  \(contentType)" + (sha256.map { "  sha256:\($0)" } ?? "")
      + (sha256 == nil ? md5Hash.map { "  md5:\($0)" } ?? "" : "")
  }
}

/// One page of a listing.
struct ListingPage {
  var items: [ObjectFacts]
  var prefixes: [String]
  var nextPageToken: String?
}
