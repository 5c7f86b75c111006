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

  /// Why `name` is not a bucket name GCS would create, or nil: 3 to 63 characters (up to 222
  /// with dots, 63 between dots) of lower-case letters, digits, `-`, `_` and `.`, starting and
  /// ending with a letter or digit.
  ///
  /// The store accepts more (``validateBucket(_:)``: 1 to 222 characters, so that existing data
  /// keeps working); what *creates* a bucket (the CLI's first write, GCS `buckets.insert`) asks
  /// this, so a slip does not make a bucket `a`.
  public static func creatableBucketProblem(_ name: String) -> String? {
    let bytes = Array(name.utf8)
    let hasDots = bytes.contains(UInt8(ascii: "."))
    guard bytes.count >= 3 else { return "it is shorter than 3 characters" }
    guard bytes.count <= (hasDots ? 222 : 63) else {
      return hasDots ? "it is longer than 222 characters" : "it is longer than 63 characters"
    }
    func alnum(_ c: UInt8) -> Bool { (0x61...0x7a).contains(c) || (0x30...0x39).contains(c) }
    guard bytes.allSatisfy({ alnum($0) || $0 == 0x2e || $0 == 0x5f || $0 == 0x2d }) else {
      return "only lower-case letters, digits, '-', '_' and '.' are allowed"
    }
    guard alnum(bytes.first!), alnum(bytes.last!) else {
      return "it must start and end with a letter or digit"
    }
    if hasDots, name.split(separator: ".").contains(where: { $0.utf8.count > 63 }) {
      return "a part between dots is longer than 63 characters"
    }
    return nil
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
