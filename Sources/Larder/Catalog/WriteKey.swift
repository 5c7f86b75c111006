import LarderCrypto

/// A piece of the catalog that a keyed write locks for itself: concurrent writes that share a
/// key run one after the other; writes with disjoint keys run together (ARCHITECTURE.md,
/// "Keyed write locks").
///
/// A key names everything its write reads in order to decide and then changes: a content's
/// `blobs` row and its file (the dedupe decision, the collector's delete), an object name's row
/// (its generation, the admission step), an upload's row (its publish). A write that touches
/// anything else, or that a key cannot describe, takes no keys and runs alone.
/// ```swift
/// try catalog.write(keys: [.content(sha256), .object(bucket: "app", name: "a.png")]) { db in … }
/// ```
package enum WriteKey: Hashable, Sendable {
  /// The `blobs` row of a SHA-256, its bytes, and every `files` row inserted against it.
  case content(sha256: [UInt8])
  /// The `objects` row of one name.
  case object(bucket: String, name: String)
  /// The `uploads` row of one resumable upload.
  case upload(id: String)
  /// A webhook subscription's deliveries (``EventDeliveryQueue``): their claims and reports.
  case subscription(id: String)

  /// The 64-bit advisory-lock key of this key in the store `namespace` (its PostgreSQL schema):
  /// the first 8 bytes of SHA-256(tag, namespace, kind, key), with length prefixes so no two
  /// different inputs share an encoding. Uniform over 2^64, so two different keys of one store
  /// collide with probability 2^-64 per pair; a collision makes two unrelated writes wait for
  /// each other (over-serialisation), never lets two writes of one key run together: equal keys
  /// always give equal numbers. Numbers whose high 32 bits are `reservedTags` (the store's
  /// write lock and the collector's lock) are moved off them, so a key never waits on those.
  package func advisoryKey(namespace: String, reservedTags: Set<UInt32>) -> Int64 {
    var input: [UInt8] = Array("larder-write-key".utf8)
    func field(_ bytes: [UInt8]) {
      withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { input.append(contentsOf: $0) }
      input.append(contentsOf: bytes)
    }
    field(Array(namespace.utf8))
    switch self {
    case .content(let sha256):
      field([1])
      field(sha256)
    case .object(let bucket, let name):
      field([2])
      field(Array(bucket.utf8))
      field(Array(name.utf8))
    case .upload(let id):
      field([3])
      field(Array(id.utf8))
    case .subscription(let id):
      field([4])
      field(Array(id.utf8))
    }
    let digest = Digest.hash(.sha256, input)
    var value = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    if reservedTags.contains(UInt32(truncatingIfNeeded: value >> 32)) { value ^= 1 << 63 }
    return Int64(bitPattern: value)
  }
}

/// A catalog connection whose write transactions can lock single ``WriteKey``s instead of the
/// whole store (PostgreSQL). A keyed transaction holds the store's write lock *shared* and each
/// of its keys exclusively; an unkeyed one (``Database/transaction(immediate:_:)``) holds the
/// store's lock exclusively, so it runs alone, as every write did before keys.
package protocol KeyedWriteDatabase: Database {
  /// Runs `body` in a write transaction that locks `keys` (a non-empty set); commits if it
  /// returns, rolls back if it throws.
  func transaction<T>(locking keys: Set<WriteKey>, _ body: (Database) throws -> T) throws -> T
}
