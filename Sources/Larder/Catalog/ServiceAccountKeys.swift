import Foundation

/// A service account's public key as the catalog keeps it (table `service_account_keys`,
/// migration 8): what every node verifies `/token` assertions and V4 signed URLs with.
public struct ServiceAccountKeyRecord: Sendable, Equatable {
  /// The key file's `private_key_id`, the assertion's `kid`.
  public var keyID: String
  /// The name given to `larder service-account create`.
  public var name: String
  /// The key file's `client_email`: the assertion's `iss`, a signed URL's credential.
  public var clientEmail: String
  public var clientID: String
  /// `-----BEGIN PUBLIC KEY-----` PEM.
  public var publicKeyPEM: String
  public var createdAt: Date

  public init(
    keyID: String, name: String, clientEmail: String, clientID: String, publicKeyPEM: String,
    createdAt: Date = Date()
  ) {
    self.keyID = keyID
    self.name = name
    self.clientEmail = clientEmail
    self.clientID = clientID
    self.publicKeyPEM = publicKeyPEM
    self.createdAt = createdAt
  }
}

extension Larder {
  /// Records a service account's public key.
  /// - Throws: ``LarderError/invalidArgument(_:)`` when the key id is taken, catalog errors.
  public func addServiceAccountKey(_ record: ServiceAccountKeyRecord) throws {
    try catalog.write { db in
      if try db.row("SELECT key_id FROM service_account_keys WHERE key_id = ?", [record.keyID]) != nil {
        throw LarderError.invalidArgument("service account key \(record.keyID) exists")
      }
      try db.execute(
        """
        INSERT INTO service_account_keys(key_id, name, client_email, client_id, public_key_pem, created_at)
        VALUES (?, ?, ?, ?, ?, ?)
        """,
        [
          record.keyID, record.name, record.clientEmail, record.clientID, record.publicKeyPEM,
          Int64(record.createdAt.timeIntervalSince1970 * 1000),
        ])
    }
  }

  /// Every recorded key, by name then creation.
  public func serviceAccountKeys() throws -> [ServiceAccountKeyRecord] {
    try catalog.read { db in
      try db.rows("SELECT * FROM service_account_keys ORDER BY name, created_at, key_id").map(
        Self.serviceAccountKey)
    }
  }

  /// The key with `keyID`, or nil (never recorded, or revoked).
  public func serviceAccountKey(id keyID: String) throws -> ServiceAccountKeyRecord? {
    try catalog.read { db in
      try db.row("SELECT * FROM service_account_keys WHERE key_id = ?", [keyID]).map(Self.serviceAccountKey)
    }
  }

  /// Every key of the account `clientEmail` (an account may have several while keys rotate).
  public func serviceAccountKeys(email clientEmail: String) throws -> [ServiceAccountKeyRecord] {
    try catalog.read { db in
      try db.rows("SELECT * FROM service_account_keys WHERE client_email = ? ORDER BY key_id", [clientEmail])
        .map(Self.serviceAccountKey)
    }
  }

  /// Deletes every key whose name, client email or key id is `nameOrEmailOrKeyID`; returns them.
  /// Tokens and signed URLs of a deleted key stop working (each node within its key cache's time).
  public func revokeServiceAccountKeys(matching nameOrEmailOrKeyID: String) throws
    -> [ServiceAccountKeyRecord]
  {
    try catalog.write { db in
      let match = "name = ? OR client_email = ? OR key_id = ?"
      let arguments = [nameOrEmailOrKeyID, nameOrEmailOrKeyID, nameOrEmailOrKeyID]
      let found = try db.rows("SELECT * FROM service_account_keys WHERE \(match) ORDER BY key_id", arguments)
        .map(Self.serviceAccountKey)
      try db.execute("DELETE FROM service_account_keys WHERE \(match)", arguments)
      return found
    }
  }

  /// Records that the assertion `id` is exchanged for a token now; when it was already, returns
  /// the time of that first exchange instead (and records nothing). Ids are kept until
  /// `expiresAt`, after which the assertion is refused as expired anyway, and pruned by later
  /// calls. The catalog holds them so that every node sees every other node's.
  ///
  /// ```swift
  /// if let first = try larder.recordServiceAccountAssertion(id: id, expiresAt: exp) { /* a repeat */ }
  /// ```
  public func recordServiceAccountAssertion(id: String, expiresAt: Date, now: Date = Date()) throws -> Date? {
    func millis(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970 * 1000) }
    return try catalog.write { db in
      try db.execute("DELETE FROM service_account_assertions WHERE expires_at < ?", [millis(now)])
      try db.execute(
        "INSERT INTO service_account_assertions(id, expires_at, issued_at) VALUES (?, ?, ?) ON CONFLICT(id) DO NOTHING",
        [id, millis(expiresAt), millis(now)])
      if db.changes == 1 { return nil }
      let first = try db.row("SELECT issued_at FROM service_account_assertions WHERE id = ?", [id])?.int("issued_at")
      return Date(timeIntervalSince1970: Double(first ?? 0) / 1000)
    }
  }

  private static func serviceAccountKey(_ row: Row) -> ServiceAccountKeyRecord {
    ServiceAccountKeyRecord(
      keyID: row.string("key_id") ?? "", name: row.string("name") ?? "",
      clientEmail: row.string("client_email") ?? "",
      clientID: row.string("client_id") ?? "", publicKeyPEM: row.string("public_key_pem") ?? "",
      createdAt: Date(timeIntervalSince1970: Double(row.int("created_at") ?? 0) / 1000))
  }
}
