internal import CCrypto

/// An RSA private key: made for a service account (`larder service-account create`), written
/// once as PKCS#8 PEM into the account's key file, and used to sign RS256 (tests, and anything
/// that acts as the account).
///
/// ```swift
/// let key = try PrivateKey.generateRSA(bits: 2048)
/// let pem = key.pkcs8PEM()            // "-----BEGIN PRIVATE KEY-----…"
/// let publicPEM = key.publicKeyPEM()  // "-----BEGIN PUBLIC KEY-----…", what the catalog keeps
/// let signature = try key.signRS256(Array("header.payload".utf8))
/// ```
/// Generation (`EVP_PKEY_generate`), the PEM encodings (`PEM_write_bio_PrivateKey`, which writes
/// PKCS#8 in OpenSSL 3, and `PEM_write_bio_PUBKEY`) and signing (`EVP_DigestSign`) are OpenSSL's.
/// Like ``PublicKey``, the key is never modified after `init`, so it may be shared across threads.
public final class PrivateKey: @unchecked Sendable {
  private let pkey: OpaquePointer
  /// The RSA modulus length in bits.
  public let bits: Int

  private init(taking pkey: OpaquePointer) {
    self.pkey = pkey
    bits = Int(EVP_PKEY_get_bits(pkey))
  }

  deinit { EVP_PKEY_free(pkey) }

  /// A fresh RSA key of `bits` (at least ``PublicKey/minimumRSABits``), public exponent 65537.
  /// - Throws: ``CryptoError/weakKey(bits:minimumBits:)`` for a short length, `.invalidKey` when
  ///   OpenSSL fails.
  public static func generateRSA(bits: Int = 2048) throws(CryptoError) -> PrivateKey {
    guard bits >= PublicKey.minimumRSABits, bits <= 16384 else {
      throw .weakKey(bits: bits, minimumBits: PublicKey.minimumRSABits)
    }
    defer { ERR_clear_error() }
    guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else { throw .invalidKey("no RSA support") }
    defer { EVP_PKEY_CTX_free(ctx) }
    var pkey: OpaquePointer?
    guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, Int32(bits)) == 1,
      EVP_PKEY_generate(ctx, &pkey) == 1, let pkey
    else { throw .invalidKey("OpenSSL could not generate an RSA key") }
    return PrivateKey(taking: pkey)
  }

  /// The first private key of PEM text (PKCS#8 or traditional RSA), unencrypted.
  /// - Throws: ``CryptoError/invalidKey(_:)`` when there is none, `.unsupportedKey` for a key that
  ///   is not RSA, `.weakKey` for a short one.
  public convenience init(pem: [UInt8]) throws(CryptoError) {
    defer { ERR_clear_error() }
    let read = pem.withUnsafeBytes { buffer -> OpaquePointer? in
      guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
      defer { BIO_free(bio) }
      return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
    }
    guard let read else { throw .invalidKey("no unencrypted PEM private key could be read") }
    guard EVP_PKEY_is_a(read, "RSA") == 1 else {
      EVP_PKEY_free(read)
      throw .unsupportedKey("only RSA private keys are supported")
    }
    self.init(taking: read)
    guard bits >= PublicKey.minimumRSABits else {
      throw .weakKey(bits: bits, minimumBits: PublicKey.minimumRSABits)
    }
  }

  /// The key as unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), what Google key files hold.
  public func pkcs8PEM() -> String {
    writePEM { bio in PEM_write_bio_PrivateKey(bio, pkey, nil, nil, 0, nil, nil) }
  }

  /// The public half as SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`).
  public func publicKeyPEM() -> String {
    writePEM { bio in PEM_write_bio_PUBKEY(bio, pkey) }
  }

  /// The public half as a ``PublicKey`` that verifies this key's signatures.
  public func publicKey() throws(CryptoError) -> PublicKey {
    guard let key = try PublicKey.allFromPEM(Array(publicKeyPEM().utf8)).first else {
      throw .invalidKey("the public key could not be read back")
    }
    return key
  }

  /// An RSASSA-PKCS1-v1_5 SHA-256 signature of `message` (JWS `RS256`, and `GOOG4-RSA-SHA256`).
  /// - Throws: ``CryptoError/invalidKey(_:)`` when OpenSSL fails.
  public func signRS256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
    defer { ERR_clear_error() }
    guard let ctx = EVP_MD_CTX_new() else { throw .invalidKey("out of memory") }
    defer { EVP_MD_CTX_free(ctx) }
    var length = 0
    guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, pkey) == 1,
      EVP_DigestSign(ctx, nil, &length, message, message.count) == 1
    else { throw .invalidKey("OpenSSL could not sign with the key") }
    var signature = [UInt8](repeating: 0, count: length)
    guard EVP_DigestSign(ctx, &signature, &length, message, message.count) == 1 else {
      throw .invalidKey("OpenSSL could not sign with the key")
    }
    return Array(signature.prefix(length))
  }

  private func writePEM(_ write: (OpaquePointer) -> Int32) -> String {
    defer { ERR_clear_error() }
    guard let bio = BIO_new(BIO_s_mem()) else { preconditionFailure("BIO_new failed") }
    defer { BIO_free(bio) }
    precondition(write(bio) == 1, "PEM encoding of a key failed")
    var data: UnsafeMutablePointer<CChar>?
    let length = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data)
    guard length > 0, let data else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
  }
}
