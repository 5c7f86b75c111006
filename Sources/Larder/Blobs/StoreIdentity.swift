import Foundation
import LarderCrypto

/// A blob store that records which stores it belongs to, so that a node or CLI whose catalog
/// and blob store are of different stores refuses to start, instead of answering every object
/// with an error (or taking another store's content for strays).
///
/// The filesystem keeps one identity in `<data>/store-id`, made with a create-if-absent link, so
/// the first writer wins. S3, which offers no conditional PUT, keeps each as an object
/// `<prefix>/store-ids/<id>`: processes racing to create a new store's identity each write their
/// own, the catalog's insert picks one, and the others remove theirs. Neither is under
/// `sha256/`, so no walk of the blobs sees them.
package protocol StoreIdentityRecording: Sendable {
  /// The identities recorded in the blob store (none, one, or, in S3 for a moment, a race's).
  func recordedStoreIdentities() throws -> Set<String>
  /// Records `identity` unless one is recorded already where only one can be (the filesystem).
  func recordStoreIdentity(_ identity: String) throws
  /// Removes `identity`, recorded by this process, which lost the race to name a new store.
  func forgetStoreIdentity(_ identity: String) throws
}

/// The identity of a store: 16 random bytes in hex, made when a store is first opened by a
/// Larder that knows identities, kept in the catalog (`settings.store_id`) and in the blob store.
///
/// ``check(catalog:content:catalogLocation:readOnly:)`` runs at every open: the blob store must hold the
/// catalog's identity. The blob store's record is always made before the catalog's, so a
/// catalog with an identity whose blob store has none is a blob store that is not the one the
/// identity was made with. A store made before identities gets one, after checking that its
/// catalog's first blobs are in this blob store.
enum StoreIdentity {
  static let settingsKey = "store_id"

  /// Compares (or, for a store without one yet, makes and records) the store's identity.
  /// - Throws: ``LarderError/invalidArgument(_:)`` naming both stores when they are not one.
  /// A read-only open compares a named store's identities and names no store.
  static func check(
    catalog: Catalog, content: any ContentStore, catalogLocation: CatalogLocation, readOnly: Bool = false
  ) throws {
    let recorder = content
    func refuse(_ why: String) -> LarderError {
      .invalidArgument(
        "the blob store \(content.location) is not the catalog's (\(catalogLocation)): \(why); "
          + "point --blobs and --catalog at one store (several nodes on one PostgreSQL catalog need "
          + "their blobs in S3, or one shared data directory)")
    }
    let recorded = try recorder.recordedStoreIdentities()
    if let known = try read(catalog) {
      if recorded.contains(known) { return }
      guard recorded.isEmpty else {
        throw refuse("the catalog is store \(known), the blob store holds store \(recorded.sorted()[0])'s content")
      }
      throw refuse(
        "the catalog is store \(known) and the blob store has no identity (if it really is this store's and its "
          + "record was removed, restore `store-id` there with \(known))")
    }
    // No identity in the catalog: a store made before identities, or a new one.
    if readOnly { return }
    let sample = try catalog.read { db in
      try db.rows("SELECT sha256, fence FROM blobs ORDER BY sha256 LIMIT 3").compactMap { row in
        row.bytes("sha256").map { BlobAddress(hex: Hex.encode($0), fence: row.int("fence") ?? 0) }
      }
    }
    if sample.isEmpty {
      try name(new: catalog, recorder: recorder, recorded: recorded, refuse: refuse)
      return
    }
    let present = try sample.contains { try content.inspect($0) != nil }
    guard present else { throw refuse("none of the catalog's first blobs is in the blob store") }
    let candidate = recorded.sorted().first ?? Hex.encode(SecureRandom.bytes(16))
    var mine: String? = candidate
    var proposed = candidate
    if recorded.isEmpty {
      try recorder.recordStoreIdentity(candidate)
      // The filesystem's record is first-writer-wins: another process's may be the one (one
      // listing, not one per question: in S3 each is a request).
      let now = try recorder.recordedStoreIdentities()
      if !now.contains(candidate) {
        mine = nil
        proposed = now.sorted().first ?? candidate
      }
    }
    let chosen = try catalog.write { db in
      if let existing = try read(db) { return existing }  // another process named the store first
      try db.execute("INSERT INTO settings(key, value) VALUES (?, ?)", [settingsKey, Array(proposed.utf8)])
      return proposed
    }
    guard chosen != proposed else { return }
    if recorded.isEmpty, mine != nil { try recorder.forgetStoreIdentity(proposed) }
    // The winner recorded its identity in its blob store before the catalog: if that is not
    // this one, the two processes were given different blob stores.
    guard try recorder.recordedStoreIdentities().contains(chosen) else {
      throw refuse("another process made this catalog store \(chosen) on another blob store at the same time")
    }
  }

  /// The settings key of a new catalog's identity between its choice and its record in the
  /// blob store: every process opening the new catalog takes the same one.
  static let claimKey = "store_id_claim"

  /// Names a new (empty) catalog's store. The identity is chosen once in the catalog (a claim
  /// every process opening it now shares), recorded in the blob store, then made the catalog's.
  /// A blob store that records any other identity, before or after this one is recorded, is
  /// another store's, even while that store holds no content yet: two stores on one bucket and
  /// prefix would each take the other's content for strays, so the new catalog is refused.
  private static func name(
    new catalog: Catalog, recorder: any StoreIdentityRecording, recorded: Set<String>,
    refuse: (String) -> LarderError
  ) throws {
    let (claim, named) = try catalog.write { db in
      if let existing = try read(db) { return (existing, true) }  // another process named it meanwhile
      if let pending = try db.row("SELECT value FROM settings WHERE key = ?", [claimKey])?.bytes("value") {
        return (String(decoding: pending, as: UTF8.self), false)
      }
      let fresh = Hex.encode(SecureRandom.bytes(16))
      try db.execute("INSERT INTO settings(key, value) VALUES (?, ?)", [claimKey, Array(fresh.utf8)])
      return (fresh, false)
    }
    if named {
      // Its blob store recorded it first: this one must hold it too.
      guard try recorder.recordedStoreIdentities().contains(claim) else {
        throw refuse("another process made this catalog store \(claim) on another blob store at the same time")
      }
      return
    }
    func refuseOthers(_ identities: Set<String>) throws {
      guard let other = identities.subtracting([claim]).sorted().first else { return }
      throw refuse(
        "it already holds store \(other)'s identity and this catalog is new (two stores must not share one "
          + "bucket and prefix: give this one its own prefix, or remove that store's identity record "
          + "`store-ids/\(other)` (`store-id` in a data directory) if that store is gone for good)")
    }
    try refuseOthers(recorded)
    if !recorded.contains(claim) {
      try recorder.recordStoreIdentity(claim)
      // Another store named at the same moment on the same blob store shows up here.
      try refuseOthers(try recorder.recordedStoreIdentities())
    }
    let chosen = try catalog.write { db in
      if let existing = try read(db) { return existing }
      try db.execute("INSERT INTO settings(key, value) VALUES (?, ?)", [settingsKey, Array(claim.utf8)])
      try db.execute("DELETE FROM settings WHERE key = ?", [claimKey])
      return claim
    }
    let recordedChosen = chosen == claim ? true : try recorder.recordedStoreIdentities().contains(chosen)
    guard recordedChosen else {
      throw refuse("another process made this catalog store \(chosen) on another blob store at the same time")
    }
  }

  private static func read(_ catalog: Catalog) throws -> String? { try catalog.read { db in try read(db) } }

  static func read(_ db: Database) throws -> String? {
    try db.row("SELECT value FROM settings WHERE key = ?", [settingsKey])?.bytes("value").map {
      String(decoding: $0, as: UTF8.self)
    }
  }
}

/// The data directory's `store-id`, for filesystem content (``LocalContentStore``) and a restore.
extension BlobStore: StoreIdentityRecording {
  private var identityPath: String { root.appendingPathComponent("store-id").path }

  package func recordedStoreIdentities() throws -> Set<String> {
    guard let data = FileManager.default.contents(atPath: identityPath) else { return [] }
    return [String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)]
  }

  /// Written whole to a temp file, then linked into place: only if no identity is there yet.
  package func recordStoreIdentity(_ identity: String) throws {
    let temp = tmpDirectory.appendingPathComponent("store-id-\(UUID().uuidString)")
    do {
      try Data((identity + "\n").utf8).write(to: temp)
    } catch {
      throw LarderError.invalidArgument("cannot record the store's identity in \(identityPath): \(error)")
    }
    defer { _ = POSIX.unlink(temp.path) }
    guard POSIX.link(temp.path, identityPath) || errno == EEXIST else {
      throw LarderError.posix("link", identityPath)
    }
  }

  /// Nothing to do: the filesystem's record is first-writer-wins, so a loser wrote none.
  package func forgetStoreIdentity(_ identity: String) throws {}
}
