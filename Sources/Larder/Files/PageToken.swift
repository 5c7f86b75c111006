import Foundation
import LarderCrypto

/// Listing page tokens: the resume position, authenticated with the store's own key.
///
/// A token is `base64url(last name) "." hex(HMAC-SHA256(key, scope ‖ name))[0..<32]`, where the
/// scope is the bucket, prefix and delimiter of the listing, so a token is opaque to clients,
/// cannot be forged, and is only valid for the listing that issued it. The key lives in the
/// catalog (`settings.page_token_key`), so tokens survive restarts.
enum PageToken {
  static func seal(_ position: String, scope: [String], db: Database) throws -> String {
    let key = try self.key(db)
    return Base64URL.encode(Array(position.utf8)) + "." + mac(position, scope: scope, key: key)
  }

  /// The position in `token`, or nil when it is malformed or was not issued for this scope.
  static func open(_ token: String, scope: [String], catalog: Catalog) throws -> String? {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 2, token.utf8.count <= 4096, let bytes = Base64URL.decode(parts[0]),
      let position = String(validating: bytes, as: UTF8.self)
    else { return nil }
    let key = try catalog.read { db in try self.key(db) }
    guard constantTimeEquals(Array(mac(position, scope: scope, key: key).utf8), Array(parts[1].utf8)) else {
      return nil
    }
    return position
  }

  private static func key(_ db: Database) throws -> [UInt8] {
    guard let key = try db.row("SELECT value FROM settings WHERE key = 'page_token_key'")?.bytes("value"),
      key.count >= 16
    else { throw LarderError.invalidArgument("the catalog has no page token key") }
    return key
  }

  private static func mac(_ position: String, scope: [String], key: [UInt8]) -> String {
    var message: [UInt8] = []
    for part in scope + [position] {
      message += Array(part.utf8)
      message.append(0)
    }
    return String(Hex.encode(HMAC.sha256(key: key, message: message)).prefix(32))
  }
}
