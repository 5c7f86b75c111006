import Foundation
import Larder
import LarderCrypto
internal import LarderS3

/// A backup destination in a bucket of an S3-compatible store (issue 35): the layout of
/// ``BackupDestination`` under the URL's `prefix` (`s3://BUCKET?endpoint=…&prefix=backups/larder`,
/// the URL and client of `--blobs`; the prefix may be nested here).
///
/// Each object is one PUT, whole or absent, and every PUT carries its SHA-256, so the store
/// refuses bytes that do not match; an acknowledged PUT is durable, so ``flush()`` has nothing
/// to do. The manifest is PUT last: a killed run leaves a catalog without one, which is not
/// listed and is removed by the next run, and the blobs it copied, which the next run's one
/// listing finds. Files are staged in the system's temporary directory (a blob on its way,
/// re-hashed; a catalog being written or read).
///
/// The lock is a lease object (`backup.lock`: owner, host, pid, expiry), since S3 has no
/// conditional PUT everywhere (OpenStack Swift has none): it is taken when absent, expired, or
/// left by a dead process of this host, and read back to see that this run won. Two runs
/// starting in the same instant may both win; one at a time is the rule it keeps otherwise.
package struct S3BackupDestination: BackupDestination {
  let client: S3Client
  /// `""`, or `P/` for the URL's `prefix=P`.
  let keyPrefix: String
  package let location: String
  let scratch: String

  /// Credentials from `credentialsFile`, else `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`.
  /// Nothing is sent until the first call.
  /// - Throws: a configuration error naming what is wrong with the URL or the credentials.
  package init(
    url: String, credentialsFile: String? = nil,
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) throws {
    let (clientURL, prefix) = try S3ContentStore.splitPrefix(url, nested: true)
    keyPrefix = prefix.map { $0 + "/" } ?? ""
    client = S3Client(
      configuration: try S3Configuration(url: clientURL),
      credentials: try S3Credentials.resolve(file: credentialsFile, environment: environment))
    let c = client.configuration
    location =
      "s3://\(c.bucket)?endpoint=\(c.endpoint)&region=\(c.region)&path-style=\(c.pathStyle ? 1 : 0)"
      + (prefix.map { "&prefix=\($0)" } ?? "")
    scratch = FileManager.default.temporaryDirectory.path
  }

  private var snapshotsPrefix: String { keyPrefix + "snapshots/" }
  private var blobsPrefix: String { keyPrefix + "blobs/sha256/" }
  private var lockKey: String { keyPrefix + "backup.lock" }
  private func blobKey(_ hex: String) -> String { blobsPrefix + BlobStore.fanOut(hex) }
  private func snapshotKey(_ id: String, _ name: String) -> String { "\(snapshotsPrefix)\(id)/\(name)" }

  /// The store's refusals and silences as ``BackupError/unreachable(destination:reason:)``,
  /// naming the destination; other errors (the source store's, a blob's bad bytes) pass.
  func s3<T>(_ body: () throws -> T) throws -> T {
    do {
      return try body()
    } catch let error as S3Error {
      throw BackupError.unreachable(destination: location, reason: error.description)
    }
  }

  /// The object's bytes; nil when there is none.
  private func object(_ key: String) throws -> [UInt8]? {
    try s3 {
      var bytes: [UInt8] = []
      do {
        try client.get(key) { bytes.append(contentsOf: $0) }
      } catch let error as S3Error where error.status == 404 && error.code != "NoSuchBucket" {
        return nil
      }
      return bytes
    }
  }

  /// One read of the prefix: the endpoint answers, takes the credentials and has the bucket.
  package func prepare() throws {
    _ = try s3 { try client.listPage(prefix: keyPrefix, maxKeys: 1) }
  }

  package func exists() throws -> Bool {
    try s3 { try !client.listPage(prefix: snapshotsPrefix, maxKeys: 1).objects.isEmpty }
  }

  package func lock() throws -> any BackupDestinationLock {
    let me = S3LeaseLock.Owner.current()
    if let held = try object(lockKey).flatMap(S3LeaseLock.Owner.init(parsing:)), held.isLive {
      throw BackupError.busy(lockPath: "\(location) \(lockKey)")
    }
    try s3 { _ = try client.put(.bytes(me.encoded), key: lockKey) }
    guard try object(lockKey).flatMap(S3LeaseLock.Owner.init(parsing:))?.token == me.token else {
      throw BackupError.busy(lockPath: "\(location) \(lockKey)")
    }
    return S3LeaseLock(destination: self, owner: me)
  }

  fileprivate func renewLock(_ owner: S3LeaseLock.Owner) throws {
    try s3 { _ = try client.put(.bytes(owner.renewed().encoded), key: lockKey) }
  }

  fileprivate func releaseLock(_ owner: S3LeaseLock.Owner) {
    guard (try? object(lockKey).flatMap(S3LeaseLock.Owner.init(parsing:))?.token) == owner.token else { return }
    try? client.delete(lockKey)
  }

  package func recordedStoreID() throws -> String? {
    try object(keyPrefix + "store-id").map {
      String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
  }

  package func recordStoreID(_ storeID: String) throws {
    try s3 { _ = try client.put(.bytes(Array((storeID + "\n").utf8)), key: keyPrefix + "store-id") }
  }

  package func snapshotIDs() throws -> [String] {
    var ids: [String] = []
    try s3 {
      try client.list(prefix: snapshotsPrefix) { object in
        let rest = object.key.dropFirst(snapshotsPrefix.count)
        guard let slash = rest.firstIndex(of: "/") else { return }
        let id = String(rest[..<slash])
        if ids.last != id { ids.append(id) }
      }
    }
    return ids
  }

  package func manifestData(_ id: String) throws -> Data? {
    try object(snapshotKey(id, "manifest.json")).map { Data($0) }
  }

  package func writeManifest(_ data: Data, snapshot id: String) throws {
    try s3 { _ = try client.put(.bytes(Array(data)), key: snapshotKey(id, "manifest.json")) }
  }

  package func removeSnapshot(_ id: String) throws {
    try s3 {
      try client.delete(snapshotKey(id, "manifest.json"))
      var keys: [String] = []
      try client.list(prefix: "\(snapshotsPrefix)\(id)/") { keys.append($0.key) }
      for key in keys { try client.delete(key) }
    }
  }

  /// Nothing: no object is ever partly written.
  package func removeTemporaries() {}

  package func catalogStagingPath(_ id: String) -> String {
    "\(scratch)/larder-backup-\(id)-\(SecureRandom.hexIdentifier(byteCount: 4)).sqlite"
  }

  package func storeCatalog(from staged: String, snapshot id: String, name: String) throws {
    defer { _ = unlink(staged) }
    let (hex, _) = try BackupFiles.sha256(ofFile: staged)
    try s3 { _ = try client.putFile(atPath: staged, key: snapshotKey(id, name), sha256Hex: hex) }
  }

  package func fetchCatalog(snapshot id: String, name: String) throws -> BackupLocalFile {
    let path = catalogStagingPath(id)
    let file = BackupLocalFile(path: path, temporary: true)
    guard FileManager.default.createFile(atPath: path, contents: nil),
      let handle = FileHandle(forWritingAtPath: path)
    else { throw LarderError.io(operation: "open", path: path, errno: errno) }
    defer { try? handle.close() }
    try s3 {
      do {
        try client.get(snapshotKey(id, name)) { chunk in handle.write(Data(chunk)) }
      } catch let error as S3Error where error.status == 404 && error.code != "NoSuchBucket" {
        throw BackupError.damaged(snapshot: id, what: "its catalog \(snapshotKey(id, name)) is missing")
      }
    }
    return file
  }

  package func listBlobs() throws -> [String: Int64]? {
    var blobs: [String: Int64] = [:]
    try forEachBlob { blobs[$0] = $1 }
    return blobs
  }

  package func storedBlob(_ hex: String) throws -> BackupStoredBlob? {
    try s3 { try client.head(blobKey(hex)).map { BackupStoredBlob(size: $0.size) } }
  }

  package func putBlob(
    hex: String, size: Int64, _ read: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void
  ) throws {
    let staged = "\(scratch)/larder-backup-\(hex).\(SecureRandom.hexIdentifier(byteCount: 4))"
    defer { _ = unlink(staged) }
    try BlobCopy.copy(hex: hex, size: size, to: staged, through: scratch, durable: false, read)
    try s3 { _ = try client.putFile(atPath: staged, key: blobKey(hex), sha256Hex: hex) }
  }

  package func readBlob(_ hex: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
    try s3 { _ = try client.get(blobKey(hex), body: body) }
  }

  package func forEachBlob(_ body: (String, Int64) throws -> Void) throws {
    try s3 {
      try client.list(prefix: blobsPrefix) { object in
        let hex = String(object.key.split(separator: "/").last ?? "")
        if hex.utf8.count == 64, object.key == blobKey(hex) { try body(hex, object.size) }
      }
    }
  }

  package func removeBlob(_ hex: String) throws {
    try s3 { try client.delete(blobKey(hex)) }
  }

  /// An acknowledged PUT is durable.
  package func flush() {}

  package func place(ofBlob hex: String) -> String { "\(location) \(blobKey(hex))" }
}

/// `backup.lock` in an S3 destination: a lease, renewed while a backup copies, deleted at the end.
final class S3LeaseLock: BackupDestinationLock, @unchecked Sendable {
  struct Owner {
    static let lease: TimeInterval = SnapshotPins.lease
    var token: String
    var host: String
    var pid: Int32
    var expires: Date

    static func current() -> Owner {
      Owner(
        token: SecureRandom.hexIdentifier(byteCount: 8), host: ProcessInfo.processInfo.hostName,
        pid: getpid(), expires: Date().addingTimeInterval(lease))
    }

    /// `token host pid expires` (seconds since 1970).
    init?(parsing bytes: [UInt8]) {
      let parts = String(decoding: bytes, as: UTF8.self).split(separator: " ")
      guard parts.count == 4, let pid = Int32(parts[2]), let expires = Double(parts[3].trimmingCharacters(in: .whitespacesAndNewlines))
      else { return nil }
      self.init(token: String(parts[0]), host: String(parts[1]), pid: pid, expires: Date(timeIntervalSince1970: expires))
    }

    init(token: String, host: String, pid: Int32, expires: Date) {
      self.token = token
      self.host = host
      self.pid = pid
      self.expires = expires
    }

    var encoded: [UInt8] { Array("\(token) \(host) \(pid) \(Int64(expires.timeIntervalSince1970))\n".utf8) }

    func renewed() -> Owner {
      var owner = self
      owner.expires = Date().addingTimeInterval(Self.lease)
      return owner
    }

    /// Unexpired, and not left by a process of this host that is gone (a backup killed here).
    var isLive: Bool {
      guard expires > Date() else { return false }
      guard host == ProcessInfo.processInfo.hostName else { return true }
      return kill(pid, 0) == 0 || errno == EPERM
    }
  }

  private let destination: S3BackupDestination
  private let owner: Owner

  init(destination: S3BackupDestination, owner: Owner) {
    self.destination = destination
    self.owner = owner
  }

  func renew() throws { try destination.renewLock(owner) }

  deinit { destination.releaseLock(owner) }
}
