import LarderCrypto

extension Larder {
  /// The bytes of the `token_secret` row: the HS256 key of this store's tokens.
  public static let tokenSecretByteCount = 32

  /// The store's HS256 token key, kept in the catalog (`settings.token_secret`) so every node
  /// sharing a catalog signs and verifies with the same key.
  ///
  /// ```swift
  /// let secret = try larder.tokenSecret(adopting: { try SecretFile.loadIfPresent(at: dir.appending(path: "secret")) })
  /// ```
  /// The row is made on first need rather than by a migration, because only then can it adopt
  /// the key older Larders kept in the data directory (`DATA/secret`): `legacy` is asked for it
  /// only while the row is absent, and its bytes (or, without them, 32 fresh random ones) are
  /// inserted under the catalog's write lock, so of several nodes racing, one inserts and the
  /// others read its row. Once the row exists the file is never read again.
  /// - Throws: what `legacy` throws, catalog errors, or ``LarderError/invalidArgument(_:)`` when
  ///   the row or the adopted key is not 32 bytes.
  public func tokenSecret(adopting legacy: () throws -> [UInt8]?) throws -> [UInt8] {
    if let existing = try catalog.read({ db in try Self.tokenSecretRow(db) }) { return existing }
    let adopted = try legacy()
    if let adopted, adopted.count != Self.tokenSecretByteCount {
      throw LarderError.invalidArgument(
        "the token secret to adopt is \(adopted.count) bytes, expected \(Self.tokenSecretByteCount)")
    }
    return try catalog.write { db in
      if let existing = try Self.tokenSecretRow(db) { return existing }  // another process won
      let secret = adopted ?? SecureRandom.bytes(Self.tokenSecretByteCount)
      try db.execute("INSERT INTO settings(key, value) VALUES ('token_secret', ?)", [secret])
      return secret
    }
  }

  private static func tokenSecretRow(_ db: Database) throws -> [UInt8]? {
    guard let row = try db.row("SELECT value FROM settings WHERE key = 'token_secret'") else { return nil }
    guard let value = row.bytes("value"), value.count == tokenSecretByteCount else {
      throw LarderError.invalidArgument(
        "the catalog's token_secret is not \(tokenSecretByteCount) bytes; delete the row to make a new one (this invalidates issued tokens)")
    }
    return value
  }
}
