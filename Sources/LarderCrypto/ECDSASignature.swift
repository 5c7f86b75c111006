internal import CCrypto

/// Converts JOSE's fixed-width ECDSA signatures (`r || s`, RFC 7518 §3.4) to the DER
/// `ECDSA-Sig-Value` that OpenSSL verifies.
///
/// ```swift
/// let der = ECDSASignature.der(fromRaw: sig64, componentSize: 32)
/// ```
/// The encoding is done by OpenSSL (`ECDSA_SIG_set0` + `i2d_ECDSA_SIG`) rather than by hand, so the only
/// hand-written part of ES256 is splitting the 64 bytes in half.
public enum ECDSASignature {
  /// DER for a raw `r || s` signature whose halves are `componentSize` bytes each; nil when the
  /// length is wrong or either half is zero (never a valid signature).
  public static func der(fromRaw raw: [UInt8], componentSize: Int = 32) -> [UInt8]? {
    guard componentSize > 0, raw.count == 2 * componentSize else { return nil }
    let rBytes = Array(raw[0..<componentSize])
    let sBytes = Array(raw[componentSize...])
    guard rBytes.contains(where: { $0 != 0 }), sBytes.contains(where: { $0 != 0 }) else { return nil }
    guard let sig = ECDSA_SIG_new() else { return nil }
    defer { ECDSA_SIG_free(sig) }
    guard let r = BN_bin2bn(rBytes, Int32(componentSize), nil) else { return nil }
    guard let s = BN_bin2bn(sBytes, Int32(componentSize), nil) else {
      BN_free(r)
      return nil
    }
    // ECDSA_SIG_set0 takes ownership of r and s on success only.
    guard ECDSA_SIG_set0(sig, r, s) == 1 else {
      BN_free(r)
      BN_free(s)
      return nil
    }
    let length = i2d_ECDSA_SIG(sig, nil)
    guard length > 0 else { return nil }
    var out = [UInt8](repeating: 0, count: Int(length))
    let written = out.withUnsafeMutableBufferPointer { buffer -> Int32 in
      var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
      return i2d_ECDSA_SIG(sig, &cursor)
    }
    guard written == length else { return nil }
    return out
  }
}
