/// Validation of bucket and object names.
///
/// Names are data, never paths: they are stored in SQLite and matched by rules, and no
/// filesystem call ever sees one. Validation still refuses what no client should send.
public enum ObjectName {
  public static let maxNameBytes = 1024
  public static let maxBucketBytes = 222

  /// Checks a bucket name: 1–222 bytes of `a-z 0-9 . _ -`, starting and ending with a letter or digit.
  /// - Throws: ``LarderError/invalidBucket(_:reason:)``.
  public static func validateBucket(_ bucket: String) throws(LarderError) {
    // The UTF-8 view itself, not a copy: this runs on every request.
    let bytes = bucket.utf8
    guard !bytes.isEmpty else { throw .invalidBucket(bucket, reason: "it is empty") }
    guard bytes.count <= maxBucketBytes else {
      throw .invalidBucket(bucket, reason: "it is longer than \(maxBucketBytes) bytes")
    }
    func alnum(_ c: UInt8) -> Bool { (0x61...0x7a).contains(c) || (0x30...0x39).contains(c) }
    for c in bytes where !(alnum(c) || c == 0x2e || c == 0x5f || c == 0x2d) {
      throw .invalidBucket(bucket, reason: "only lower-case letters, digits, '.', '_' and '-' are allowed")
    }
    guard alnum(bytes.first!), alnum(bytes.last!) else {
      throw .invalidBucket(bucket, reason: "it must start and end with a letter or digit")
    }
  }

  /// Checks an object name: 1–1024 bytes of UTF-8, no control characters, no `.` or `..` segment.
  /// - Throws: ``LarderError/invalidName(_:reason:)``.
  public static func validateName(_ name: String) throws(LarderError) {
    guard !name.isEmpty else { throw .invalidName(name, reason: "it is empty") }
    guard name.utf8.count <= maxNameBytes else {
      throw .invalidName(name, reason: "it is longer than \(maxNameBytes) bytes")
    }
    for scalar in name.unicodeScalars {
      if scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) {
        throw .invalidName(name, reason: "it contains a control character (U+\(String(scalar.value, radix: 16, uppercase: true)))")
      }
      if scalar.value == 0xFFFE || scalar.value == 0xFFFF || scalar.value == 0x10FFFF {
        throw .invalidName(name, reason: "it contains a Unicode noncharacter")
      }
    }
    if name.utf8.allSatisfy({ $0 < 0x80 }) {
      // Byte by byte for ASCII names (the same segments; this runs on every request).
      var length = 0
      var dotsOnly = true
      for c in name.utf8 {
        if c == 0x2F {
          if dotsOnly && (length == 1 || length == 2) { throw .invalidName(name, reason: Self.dotSegments) }
          length = 0
          dotsOnly = true
        } else {
          length += 1
          dotsOnly = dotsOnly && c == 0x2E
        }
      }
      if dotsOnly && (length == 1 || length == 2) { throw .invalidName(name, reason: Self.dotSegments) }
      return
    }
    for segment in name.split(separator: "/", omittingEmptySubsequences: false) where segment == "." || segment == ".." {
      throw .invalidName(name, reason: Self.dotSegments)
    }
  }

  private static let dotSegments = "'.' and '..' segments are not allowed"
}
