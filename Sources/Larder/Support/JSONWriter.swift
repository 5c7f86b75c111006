/// Writes JSON exactly as Foundation's `JSONEncoder` with `.sortedKeys` writes it (and, where
/// asked, `.withoutEscapingSlashes`): nothing between tokens; `"`, `\`, `/` and the control
/// characters escaped as it escapes them (`\b \f \n \r \t`, else `\u00xx` in lower-case hex),
/// everything else as its UTF-8 bytes; whole doubles without `.0`. For the documents written on
/// every object change and every event delivery (the outbox's stored object, the CloudEvent,
/// the GCS object resource), where building Codable containers cost more than the rest.
///
/// The caller writes an object's fixed keys in their sorted order (by UTF-8 bytes, as the
/// encoder sorts on Linux); a dictionary's keys are sorted here.
/// ```swift
/// var json = JSONWriter(escapingSlashes: false)
/// json.beginObject()
/// json.field("bucket", "app")
/// json.field("size", Int64(4096))
/// json.endObject()      // {"bucket":"app","size":4096}
/// ```
package struct JSONWriter {
  package private(set) var bytes: [UInt8] = []
  /// `JSONEncoder`'s default: `/` written `\/`.
  private let escapingSlashes: Bool
  /// No member or element written yet in the innermost open object or array.
  private var first = true

  package init(escapingSlashes: Bool, capacity: Int = 512) {
    self.escapingSlashes = escapingSlashes
    bytes.reserveCapacity(capacity)
  }

  package mutating func beginObject() {
    separate()
    bytes.append(0x7B)
    first = true
  }

  package mutating func endObject() {
    bytes.append(0x7D)
    first = false
  }

  package mutating func beginArray() {
    separate()
    bytes.append(0x5B)
    first = true
  }

  package mutating func endArray() {
    bytes.append(0x5D)
    first = false
  }

  /// A member's key; its value follows (a `value` call, or an object or array).
  package mutating func key(_ key: String) {
    separate()
    string(key)
    bytes.append(0x3A)
    first = true
  }

  package mutating func value(_ text: String) {
    separate()
    string(text)
  }

  package mutating func value(_ number: Int64) {
    separate()
    bytes.append(contentsOf: String(number).utf8)
  }

  /// As `JSONEncoder` writes a `Double` (a `Date`'s `timeIntervalSinceReferenceDate`): its
  /// shortest description, `.0` dropped.
  /// - Throws: ``JSONWriterError`` for infinity and NaN, which JSON cannot hold.
  package mutating func value(_ number: Double) throws(JSONWriterError) {
    guard number.isFinite else { throw JSONWriterError(value: number) }
    separate()
    var text = number.description
    if text.hasSuffix(".0") { text.removeLast(2) }
    bytes.append(contentsOf: text.utf8)
  }

  package mutating func field(_ name: String, _ text: String) {
    key(name)
    value(text)
  }

  package mutating func field(_ name: String, _ number: Int64) {
    key(name)
    value(number)
  }

  /// Nothing when `text` is nil (as `encodeIfPresent`).
  package mutating func field(_ name: String, _ text: String?) {
    if let text { field(name, text) }
  }

  /// A `[String: String]` as an object, keys in UTF-8 order.
  package mutating func field(_ name: String, _ dictionary: [String: String]) {
    key(name)
    beginObject()
    for (key, value) in dictionary.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
      field(key, value)
    }
    endObject()
  }

  package mutating func field(_ name: String, _ strings: [String]) {
    key(name)
    beginArray()
    for text in strings { value(text) }
    endArray()
  }

  /// Bytes that are already one JSON value (a document this writer made).
  package mutating func raw(_ json: [UInt8]) {
    separate()
    bytes.append(contentsOf: json)
  }

  private mutating func separate() {
    if first {
      first = false
    } else {
      bytes.append(0x2C)
    }
  }

  private mutating func string(_ text: String) {
    bytes.append(0x22)
    var text = text
    text.withUTF8 { utf8 in
      var mark = 0
      for i in utf8.indices {
        let byte = utf8[i]
        guard byte < 0x20 || byte == 0x22 || byte == 0x5C || (byte == 0x2F && escapingSlashes) else {
          continue
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[mark..<i]))
        mark = i + 1
        bytes.append(0x5C)
        switch byte {
        case 0x22, 0x5C, 0x2F: bytes.append(byte)
        case 0x08: bytes.append(0x62)
        case 0x0C: bytes.append(0x66)
        case 0x0A: bytes.append(0x6E)
        case 0x0D: bytes.append(0x72)
        case 0x09: bytes.append(0x74)
        default:
          let hex: StaticString = "0123456789abcdef"
          bytes.append(contentsOf: [
            0x75, 0x30, 0x30, hex.utf8Start[Int(byte >> 4)], hex.utf8Start[Int(byte & 0xF)],
          ])
        }
      }
      bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[mark...]))
    }
    bytes.append(0x22)
  }
}

/// A number JSON cannot hold (infinity or NaN), as `JSONEncoder` refuses it.
package struct JSONWriterError: Error, CustomStringConvertible {
  package var value: Double
  package var description: String { "\(value) cannot be written as JSON" }
}
