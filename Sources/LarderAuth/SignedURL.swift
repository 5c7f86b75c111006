import Foundation
import LarderCrypto

/// Google's V4 signing (`GOOG4-RSA-SHA256`) of a URL, as `blob.generate_signed_url(version="v4")`
/// makes it and https://cloud.google.com/storage/docs/authentication/signatures describes:
///
/// ```
/// canonical request = METHOD \n /bucket/object (percent-encoded, slashes kept) \n
///                     sorted k=v query without X-Goog-Signature \n host:h\n \n host \n UNSIGNED-PAYLOAD
/// string to sign    = GOOG4-RSA-SHA256 \n X-Goog-Date \n date/auto/storage/goog4_request \n hex(sha256(canonical request))
/// X-Goog-Signature  = hex(RSASSA-PKCS1-v1_5-SHA256(private key, string to sign))
/// ```
/// Encoding is RFC 3986's: unreserved characters (`A–Z a–z 0–9 - . _ ~`) as they are, every other
/// byte of the UTF-8 as `%XX` (upper-case), exactly as google-cloud-storage's `quote(safe="~")`.
public enum GoogleV4Signing {
  public static let algorithm = "GOOG4-RSA-SHA256"
  public static let signatureParameter = "X-Goog-Signature"
  /// Google's limit on `X-Goog-Expires`: seven days.
  public static let maxExpiry = 604_800

  /// `text` percent-encoded, keeping unreserved characters (and `/` when `keepingSlashes`).
  public static func encode(_ text: String, keepingSlashes: Bool = false) -> String {
    let hex = Array("0123456789ABCDEF".utf8)
    var out: [UInt8] = []
    for byte in text.utf8 {
      switch byte {
      case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E: out.append(byte)
      case 0x2F where keepingSlashes: out.append(byte)
      default: out += [0x25, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
      }
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// The canonical request. `path` is decoded (`/bucket/a b/c`); `query` decoded, without the
  /// signature; `headers` the signed ones, names in any case.
  public static func canonicalRequest(
    method: String, path: String, query: [(name: String, value: String)],
    headers: [(name: String, value: String)],
    payload: String = "UNSIGNED-PAYLOAD"
  ) -> String {
    let canonicalQuery = query.map { encode($0.name) + "=" + encode($0.value) }.sorted().joined(
      separator: "&")
    let normalized = headers.map {
      ($0.name.lowercased(), $0.value.split(whereSeparator: \.isWhitespace).joined(separator: " "))
    }
    .sorted { $0.0 < $1.0 }
    let canonicalHeaders = normalized.map { "\($0.0):\($0.1)\n" }.joined()
    let signedHeaders = normalized.map(\.0).joined(separator: ";")
    return [
      method, encode(path, keepingSlashes: true), canonicalQuery, canonicalHeaders, signedHeaders, payload,
    ]
    .joined(separator: "\n")
  }

  /// The string an account's key signs.
  public static func stringToSign(timestamp: String, credentialScope: String, canonicalRequest: String)
    -> String
  {
    [algorithm, timestamp, credentialScope, Hex.encode(Digest.hash(.sha256, Array(canonicalRequest.utf8)))]
      .joined(separator: "\n")
  }
}

/// Why a signed URL was refused; every case but ``malformed(_:)`` is answered 403.
public enum SignedURLError: Error, Sendable, Equatable {
  case malformed(String)
  case expired(expiredAt: Date)
  case notYetValid
  /// No key of a service account with this email (never made, or revoked).
  case unknownAccount(String)
  case signatureMismatch

  public var code: String {
    switch self {
    case .malformed: "malformed_signed_url"
    case .expired: "signed_url_expired"
    case .notYetValid: "signed_url_not_yet_valid"
    case .unknownAccount: "unknown_service_account"
    case .signatureMismatch: "signature_does_not_match"
    }
  }

  public var message: String {
    switch self {
    case .malformed(let why): "malformed signed URL: \(why)"
    case .expired(let at): "the signed URL expired at \(AuthError.unixTime(at)) (unix time)"
    case .notYetValid: "the signed URL's X-Goog-Date is in the future"
    case .unknownAccount(let email):
      "no service account key for \(AuthError.quote(email)) (unknown or revoked)"
    case .signatureMismatch:
      "the request signature does not match: the URL was changed, or signed for another method, host or key"
    }
  }
}

/// Checks a V4 signed URL request.
///
/// ```swift
/// let email = try SignedURLVerifier.credentialEmail(query)
/// let ok = try SignedURLVerifier.verify(method: "GET", path: "/b/o", query: query, header: { request.headers[$0] },
///                                       keys: publicKeysOf(email))
/// ```
public enum SignedURLVerifier {
  /// The `client_email` of `X-Goog-Credential`, to find the keys.
  public static func credentialEmail(_ query: [(name: String, value: String)]) throws(SignedURLError)
    -> String
  {
    try credential(query).email
  }

  static func credential(_ query: [(name: String, value: String)]) throws(SignedURLError) -> (
    email: String, scope: String, date: String
  ) {
    guard let credential = value("X-Goog-Credential", query) else {
      throw .malformed("X-Goog-Credential is missing")
    }
    let parts = credential.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    guard parts.count == 5, !parts[0].isEmpty, parts[1].count == 8, parts[3] == "storage",
      parts[4] == "goog4_request"
    else { throw .malformed("X-Goog-Credential must be EMAIL/YYYYMMDD/REGION/storage/goog4_request") }
    return (parts[0], parts[1...].joined(separator: "/"), parts[1])
  }

  static func value(_ name: String, _ query: [(name: String, value: String)]) -> String? {
    query.first { $0.name == name }?.value
  }

  /// Verifies the request against `keys` (any may have signed it) at `now`; returns when it expires.
  /// - Throws: ``SignedURLError``.
  public static func verify(
    method: String, path: String, query: [(name: String, value: String)], header: (String) -> String?,
    keys: [PublicKey], now: Date = Date(), leeway: TimeInterval = 60
  ) throws(SignedURLError) -> Date {
    guard value("X-Goog-Algorithm", query) == GoogleV4Signing.algorithm else {
      throw .malformed("X-Goog-Algorithm must be \(GoogleV4Signing.algorithm)")
    }
    let (email, scope, day) = try credential(query)
    guard let timestamp = value("X-Goog-Date", query), let signedAt = parseTimestamp(timestamp),
      timestamp.hasPrefix(day)
    else { throw .malformed("X-Goog-Date must be YYYYMMDDTHHMMSSZ of the credential's date") }
    guard let expiresText = value("X-Goog-Expires", query), let expires = Int(expiresText),
      (1...GoogleV4Signing.maxExpiry).contains(expires)
    else { throw .malformed("X-Goog-Expires must be 1 to \(GoogleV4Signing.maxExpiry) seconds") }
    guard let signedHeaderList = value("X-Goog-SignedHeaders", query) else {
      throw .malformed("X-Goog-SignedHeaders is missing")
    }
    let signedHeaders = signedHeaderList.split(separator: ";").map { $0.lowercased() }
    guard signedHeaders.contains("host") else { throw .malformed("X-Goog-SignedHeaders must include host") }
    guard let hex = value(GoogleV4Signing.signatureParameter, query), let signature = Hex.decode(hex),
      !signature.isEmpty
    else { throw .malformed("X-Goog-Signature must be hex") }
    let expiresAt = signedAt.addingTimeInterval(TimeInterval(expires))
    if now >= expiresAt { throw .expired(expiredAt: expiresAt) }
    if signedAt.timeIntervalSince(now) > leeway { throw .notYetValid }
    guard !keys.isEmpty else { throw .unknownAccount(email) }
    var headers: [(name: String, value: String)] = []
    for name in signedHeaders {
      guard let v = header(name) else { throw .signatureMismatch }
      headers.append((name, v))
    }
    // Node's signer signs `host` as the host name without the port its URL has: the request's
    // host is either, and only the port may be left out.
    var signedVariants = [headers]
    let hostIndex = headers.firstIndex { $0.name == "host" }
    if let i = hostIndex, let bare = hostWithoutPort(headers[i].value) {
      var variant = headers
      variant[i].value = bare
      signedVariants.append(variant)
    }
    let messages = signedVariants.map { headers in
      let canonical = GoogleV4Signing.canonicalRequest(
        method: method, path: path, query: query.filter { $0.name != GoogleV4Signing.signatureParameter },
        headers: headers, payload: value("X-Goog-Content-SHA256", query) ?? "UNSIGNED-PAYLOAD")
      let text = GoogleV4Signing.stringToSign(
        timestamp: timestamp, credentialScope: scope, canonicalRequest: canonical)
      return Array(text.utf8)
    }
    let verified = keys.contains { key in
      messages.contains { key.verifyRS256(signature: signature, message: $0) }
    }
    guard verified else { throw .signatureMismatch }
    return expiresAt
  }

  /// `host:port` (or `[v6]:port`) without `:port`; nil when there is no port.
  static func hostWithoutPort(_ host: String) -> String? {
    guard let colon = host.lastIndex(of: ":"), !host.hasSuffix("]") else { return nil }
    let name = host[..<colon]
    let port = host[host.index(after: colon)...]
    guard !name.isEmpty, !port.isEmpty, port.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
      name.hasPrefix("[") ? name.hasSuffix("]") : !name.contains(":")
    else { return nil }
    return String(name)
  }

  /// `YYYYMMDDTHHMMSSZ` as a date (UTC), nil when malformed.
  static func parseTimestamp(_ text: String) -> Date? {
    let u = Array(text.utf8)
    guard u.count == 16, u[8] == UInt8(ascii: "T"), u[15] == UInt8(ascii: "Z") else { return nil }
    func number(_ range: Range<Int>) -> Int? {
      guard u[range].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
      return Int(String(decoding: u[range], as: UTF8.self))
    }
    guard let year = number(0..<4), let month = number(4..<6), let day = number(6..<8),
      let hour = number(9..<11),
      let minute = number(11..<13), let second = number(13..<15), (1...12).contains(month),
      (1...31).contains(day),
      hour < 24, minute < 60, second < 61
    else { return nil }
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    return calendar.date(
      from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second))
  }
}
