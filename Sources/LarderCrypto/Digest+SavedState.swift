internal import CCrypto

/// Saving and restoring a running SHA-256, so a resumable upload continued on another node
/// resumes its hash from bytes kept in the catalog instead of re-reading the upload.
///
/// The bytes are an explicit, portable encoding of `SHA256_CTX`'s fields, never a copy of the
/// struct (whose layout and word order are the host's), so any node (any architecture, any
/// OpenSSL that has the classic SHA-256 state) can read them:
///
/// | offset | bytes | field |
/// | --- | --- | --- |
/// | 0 | 1 | version, `1` |
/// | 1 | 32 | `h[0]` … `h[7]`, big-endian 32-bit words |
/// | 33 | 4 | `Nl`, big-endian: low 32 bits of the message length in bits |
/// | 37 | 4 | `Nh`, big-endian: high 32 bits of the message length in bits |
/// | 41 | 1 | `num`: bytes waiting in the current 64-byte block, 0…63 |
/// | 42 | `num` | those bytes |
///
/// A state is 42…105 bytes. Restoring checks the version, the length, `num < 64` and that `num`
/// agrees with the length in bits (a whole number of bytes, `num` = bytes mod 64), so truncated
/// or mixed-up bytes are refused rather than hashed into a wrong address.
extension Digest {
  /// The version byte of `savedState()`'s encoding; a new layout takes a new number.
  static let savedStateVersion: UInt8 = 1
  private static let savedStateHeaderCount = 42
  private static let blockSize = 64

  /// The running SHA-256 state as portable bytes (only for .sha256; precondition otherwise).
  ///
  /// ```swift
  /// let d = Digest(.sha256)
  /// d.update(firstPatch)
  /// catalogRow.hashState = d.savedState()        // 42…105 bytes
  /// // later, on any node:
  /// let resumed = try Digest(restoringSHA256: catalogRow.hashState)
  /// resumed.update(nextPatch)
  /// ```
  public func savedState() -> [UInt8] {
    guard case .sha256(let ctx) = context else {
      preconditionFailure("Digest.savedState: only SHA-256 can be saved, not \(algorithm)")
    }
    let num = Int(ctx.pointee.num)
    var out = [UInt8]()
    out.reserveCapacity(Self.savedStateHeaderCount + num)
    out.append(Self.savedStateVersion)
    func appendBigEndian(_ word: UInt32) {
      out.append(contentsOf: [
        UInt8(word >> 24), UInt8(truncatingIfNeeded: word >> 16),
        UInt8(truncatingIfNeeded: word >> 8), UInt8(truncatingIfNeeded: word),
      ])
    }
    withUnsafeBytes(of: ctx.pointee.h) { h in
      for word in h.bindMemory(to: UInt32.self) { appendBigEndian(word) }
    }
    appendBigEndian(ctx.pointee.Nl)
    appendBigEndian(ctx.pointee.Nh)
    out.append(UInt8(num))
    // OpenSSL keeps the pending block as bytes in `data` (md32_common.h copies input there
    // with memcpy), so its first `num` bytes are the input bytes in order, on any host.
    withUnsafeBytes(of: ctx.pointee.data) { out.append(contentsOf: $0.prefix(num)) }
    return out
  }

  /// A SHA-256 digest continuing from savedState() bytes.
  ///
  /// - Parameter byteCount: when given, the number of bytes the state must have hashed: a
  ///   well-formed state of another prefix (stale, or another upload's) is refused too.
  /// - Throws: `CryptoError.invalidDigestState` for another version, a wrong length, `num` ≥ 64,
  ///   a `num` that disagrees with the bit count, or a count other than `byteCount`.
  public convenience init(restoringSHA256 state: [UInt8], byteCount: UInt64? = nil) throws {
    let header = Self.savedStateHeaderCount
    guard state.count >= header else {
      throw CryptoError.invalidDigestState("\(state.count) bytes, a state has at least \(header)")
    }
    guard state[0] == Self.savedStateVersion else {
      throw CryptoError.invalidDigestState("version \(state[0]), expected \(Self.savedStateVersion)")
    }
    let num = Int(state[41])
    guard num < Self.blockSize else {
      throw CryptoError.invalidDigestState("\(num) pending bytes, a block holds fewer than \(Self.blockSize)")
    }
    guard state.count == header + num else {
      throw CryptoError.invalidDigestState(
        "\(state.count) bytes for \(num) pending bytes, expected \(header + num)")
    }
    func bigEndian(at offset: Int) -> UInt32 {
      state[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }
    let nl = bigEndian(at: 33)
    let nh = bigEndian(at: 37)
    let bits = UInt64(nh) << 32 | UInt64(nl)
    guard bits % 8 == 0, Int((bits / 8) % UInt64(Self.blockSize)) == num else {
      throw CryptoError.invalidDigestState("length of \(bits) bits disagrees with \(num) pending bytes")
    }
    if let byteCount, bits / 8 != byteCount {
      throw CryptoError.invalidDigestState("a state of \(bits / 8) bytes, expected \(byteCount)")
    }
    self.init(.sha256)
    guard case .sha256(let ctx) = context else { preconditionFailure("Digest(.sha256) without SHA256_CTX") }
    // SHA256_Init set md_len (32) and zeroed the block; the rest comes from the saved bytes.
    withUnsafeMutableBytes(of: &ctx.pointee.h) { h in
      let words = h.bindMemory(to: UInt32.self)
      for i in 0..<8 { words[i] = bigEndian(at: 1 + 4 * i) }
    }
    ctx.pointee.Nl = nl
    ctx.pointee.Nh = nh
    ctx.pointee.num = UInt32(num)
    withUnsafeMutableBytes(of: &ctx.pointee.data) { block in
      for i in 0..<num { block[i] = state[header + i] }
    }
  }
}
