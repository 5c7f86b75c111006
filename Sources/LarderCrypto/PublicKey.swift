internal import CCrypto

/// A public key that verifies JWS signatures (RS256, ES256) through OpenSSL's `EVP_DigestVerify*`.
///
/// ```swift
/// let key = try PublicKey.allFromPEM(Array(pemText.utf8))[0]
/// let ok = key.verifyES256(rawSignature: sig, message: Array(signingInput.utf8))
/// ```
/// Why OpenSSL directly and not a JOSE library such as cjose: cjose is itself a layer over this very
/// OpenSSL (so it would be one C library more, not one fewer), it cannot read PEM public keys or
/// certificates (the other half of what Larder accepts), and the JOSE-specific parts left to write are
/// small and tested: strict base64url, the `r || s` → DER conversion (done by `ECDSA_SIG_set0` +
/// `i2d_ECDSA_SIG`), and JWK numbers → key (done by `OSSL_PARAM_BLD` + `EVP_PKEY_fromdata`). The
/// signature mathematics, padding checks and point validation all stay inside OpenSSL.
///
/// Only RSA keys of at least `minimumRSABits` and EC keys on P-256 are accepted, so a key's kind
/// alone decides which algorithm may use it.
///
/// Thread safety: the key is never modified after `init`, and every verification makes its own
/// `EVP_MD_CTX`; OpenSSL 3 allows an `EVP_PKEY` to be used concurrently this way (openssl-threads(7)),
/// hence `@unchecked Sendable`.
public final class PublicKey: @unchecked Sendable {
  /// The kinds of key Larder verifies with.
  public enum Kind: Sendable, Equatable {
    case rsa(bits: Int)
    case ecP256
  }

  /// RSA keys shorter than this are refused at load time.
  public static let minimumRSABits = 2048

  public let kind: Kind
  private let pkey: OpaquePointer

  /// Takes ownership of `pkey` (freed on any throw as well).
  private init(taking pkey: OpaquePointer) throws(CryptoError) {
    do {
      kind = try Self.classify(pkey)
    } catch {
      EVP_PKEY_free(pkey)
      throw error
    }
    self.pkey = pkey
  }

  deinit { EVP_PKEY_free(pkey) }

  /// Every `PUBLIC KEY` block in the PEM text, or (when there is none) every `CERTIFICATE`'s key.
  /// - Throws: `CryptoError.invalidKey` when there is none; the first unsupported or weak key's error.
  public static func allFromPEM(_ pem: [UInt8]) throws(CryptoError) -> [PublicKey] {
    defer { ERR_clear_error() }
    var raw = readPEM(pem) { bio in PEM_read_bio_PUBKEY(bio, nil, nil, nil) }
    if raw.isEmpty {
      raw = readPEM(pem) { bio -> OpaquePointer? in
        guard let cert = PEM_read_bio_X509(bio, nil, nil, nil) else { return nil }
        defer { X509_free(cert) }
        return X509_get_pubkey(cert)
      }
    }
    guard !raw.isEmpty else {
      throw .invalidKey("no PEM \"PUBLIC KEY\" or \"CERTIFICATE\" block could be read")
    }
    var keys = [PublicKey]()
    var failure: CryptoError?
    for pkey in raw {
      if failure != nil {
        EVP_PKEY_free(pkey)
        continue
      }
      do { keys.append(try PublicKey(taking: pkey)) } catch { failure = error }
    }
    if let failure { throw failure }
    return keys
  }

  private static func readPEM(_ pem: [UInt8], _ next: (OpaquePointer) -> OpaquePointer?) -> [OpaquePointer] {
    pem.withUnsafeBytes { buffer -> [OpaquePointer] in
      guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return [] }
      defer { BIO_free(bio) }
      var keys = [OpaquePointer]()
      // A bound so a hostile file of thousands of keys cannot make start-up slow.
      while keys.count < 256, let key = next(bio) { keys.append(key) }
      return keys
    }
  }

  /// An RSA public key from its big-endian modulus and exponent (a JWK's `n` and `e`).
  /// - Throws: `CryptoError` for a malformed or too short key.
  public convenience init(rsaModulus n: [UInt8], exponent e: [UInt8]) throws(CryptoError) {
    guard !n.isEmpty, !e.isEmpty, n.count <= 2048, e.count <= 8 else {
      throw .invalidKey("RSA modulus or exponent has an impossible length")
    }
    // OSSL_PARAM_BLD keeps pointers (to keys, BIGNUMs, buffers) until the key is built, so all of
    // them must outlive `fromData`: static key names, and BIGNUMs freed only afterwards.
    guard let bnN = BN_bin2bn(n, Int32(n.count), nil) else { throw .invalidKey("out of memory") }
    defer { BN_free(bnN) }
    guard let bnE = BN_bin2bn(e, Int32(e.count), nil) else { throw .invalidKey("out of memory") }
    defer { BN_free(bnE) }
    let pkey = try Self.fromData(type: "RSA") { builder in
      OSSL_PARAM_BLD_push_BN(builder, Self.cString("n"), bnN) == 1
        && OSSL_PARAM_BLD_push_BN(builder, Self.cString("e"), bnE) == 1
    }
    try self.init(taking: pkey)
  }

  /// A P-256 public key from its affine coordinates (a JWK's `x` and `y`, 32 bytes each).
  /// - Throws: `CryptoError.invalidKey` when the point is not on the curve.
  public convenience init(p256X x: [UInt8], y: [UInt8]) throws(CryptoError) {
    guard x.count == 32, y.count == 32 else {
      throw .invalidKey("P-256 coordinates must be 32 bytes each")
    }
    let point = [0x04] + x + y  // SEC 1 uncompressed point
    let built = point.withUnsafeBytes { buffer -> Result<OpaquePointer, CryptoError> in
      Result { () throws(CryptoError) -> OpaquePointer in
        try Self.fromData(type: "EC") { builder in
          OSSL_PARAM_BLD_push_utf8_string(builder, Self.cString("group"), Self.cString("prime256v1"), 0) == 1
            && OSSL_PARAM_BLD_push_octet_string(
              builder, Self.cString("pub"), buffer.baseAddress, buffer.count) == 1
        }
      }
    }
    try self.init(taking: built.get())
  }

  /// A NUL-terminated C string with static lifetime, as OSSL_PARAM_BLD requires for names.
  private static func cString(_ string: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(string.utf8Start).assumingMemoryBound(to: CChar.self)
  }

  /// Builds a public key of `type` from the parameters `fill` pushes; everything `fill` points to
  /// must stay valid until this returns.
  private static func fromData(type: String, _ fill: (OpaquePointer) -> Bool) throws(CryptoError)
    -> OpaquePointer
  {
    defer { ERR_clear_error() }
    guard let builder = OSSL_PARAM_BLD_new() else { throw .invalidKey("out of memory") }
    defer { OSSL_PARAM_BLD_free(builder) }
    guard fill(builder), let params = OSSL_PARAM_BLD_to_param(builder) else {
      throw .invalidKey("could not build \(type) key parameters")
    }
    defer { OSSL_PARAM_free(params) }
    guard let ctx = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
      throw .invalidKey("no \(type) support")
    }
    defer { EVP_PKEY_CTX_free(ctx) }
    var pkey: OpaquePointer?
    // EVP_PKEY_PUBLIC_KEY = OSSL_KEYMGMT_SELECT_ALL_PARAMETERS | OSSL_KEYMGMT_SELECT_PUBLIC_KEY.
    let selection = Int32(OSSL_KEYMGMT_SELECT_ALL_PARAMETERS | OSSL_KEYMGMT_SELECT_PUBLIC_KEY)
    guard EVP_PKEY_fromdata_init(ctx) == 1, EVP_PKEY_fromdata(ctx, &pkey, selection, params) == 1,
      let pkey
    else { throw .invalidKey("OpenSSL rejected the \(type) key parameters") }
    // fromdata only decodes; the public check also proves an EC point lies on the curve.
    guard let check = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else {
      EVP_PKEY_free(pkey)
      throw .invalidKey("out of memory")
    }
    defer { EVP_PKEY_CTX_free(check) }
    guard EVP_PKEY_public_check(check) == 1 else {
      EVP_PKEY_free(pkey)
      throw .invalidKey("the \(type) public key failed OpenSSL's validity check")
    }
    return pkey
  }

  private static func classify(_ pkey: OpaquePointer) throws(CryptoError) -> Kind {
    if EVP_PKEY_is_a(pkey, "RSA") == 1 {
      let bits = Int(EVP_PKEY_get_bits(pkey))
      guard bits >= minimumRSABits else { throw .weakKey(bits: bits, minimumBits: minimumRSABits) }
      return .rsa(bits: bits)
    }
    if EVP_PKEY_is_a(pkey, "EC") == 1 {
      var name = [CChar](repeating: 0, count: 64)
      var length = 0
      guard EVP_PKEY_get_group_name(pkey, &name, name.count, &length) == 1 else {
        throw .unsupportedKey("EC key without a named curve")
      }
      let curve = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
      guard curve == "prime256v1" || curve == "P-256" else { throw .unsupportedKey("EC curve \(curve)") }
      return .ecP256
    }
    let typeName = EVP_PKEY_get0_type_name(pkey).map { String(cString: $0) } ?? "unknown"
    throw .unsupportedKey(typeName)
  }

  /// Verifies an RSASSA-PKCS1-v1_5 SHA-256 signature (JWS `RS256`); false for an EC key.
  public func verifyRS256(signature: [UInt8], message: [UInt8]) -> Bool {
    guard case .rsa = kind else { return false }
    return digestVerify(signature: signature, message: message)
  }

  /// Verifies an ECDSA P-256 SHA-256 signature in JOSE's raw `r || s` form (JWS `ES256`); false for
  /// an RSA key or a signature that is not exactly 64 bytes.
  public func verifyES256(rawSignature: [UInt8], message: [UInt8]) -> Bool {
    guard kind == .ecP256, let der = ECDSASignature.der(fromRaw: rawSignature, componentSize: 32) else {
      return false
    }
    return digestVerify(signature: der, message: message)
  }

  private func digestVerify(signature: [UInt8], message: [UInt8]) -> Bool {
    defer { ERR_clear_error() }
    guard let ctx = EVP_MD_CTX_new() else { return false }
    defer { EVP_MD_CTX_free(ctx) }
    guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else { return false }
    return EVP_DigestVerify(ctx, signature, signature.count, message, message.count) == 1
  }
}
