import Foundation

/// `Upload-Metadata`: comma-separated `key base64value` pairs (the value may be omitted).
///
/// ```swift
/// try TusMetadata.parse("name dmlkZW8ubXA0,public") // ["name": "video.mp4", "public": ""]
/// ```
/// Parsed strictly: keys are non-empty ASCII without spaces or commas and unique; values are
/// canonical standard base64 of UTF-8 text. An empty header is no metadata.
enum TusMetadata {
  enum ParseError: Error, Equatable, CustomStringConvertible {
    case malformedPair(String)
    case duplicateKey(String)
    case invalidBase64(key: String)
    case notUTF8(key: String)

    var description: String {
      switch self {
      case .malformedPair(let p):
        "Upload-Metadata pair \(p.prefix(80).debugDescription) is not 'key base64value'"
      case .duplicateKey(let k): "Upload-Metadata key \(k.prefix(80).debugDescription) appears more than once"
      case .invalidBase64(let k):
        "Upload-Metadata value of \(k.prefix(80).debugDescription) is not valid base64"
      case .notUTF8(let k): "Upload-Metadata value of \(k.prefix(80).debugDescription) is not UTF-8 text"
      }
    }
  }

  static func parse(_ header: String) throws(ParseError) -> [String: String] {
    var result: [String: String] = [:]
    if header.trimmingCharacters(in: .whitespaces).isEmpty { return result }
    for rawPair in header.split(separator: ",", omittingEmptySubsequences: false) {
      let pair = rawPair.trimmingCharacters(in: .whitespaces)
      let parts = pair.split(separator: " ", omittingEmptySubsequences: false)
      guard (1...2).contains(parts.count), let key = parts.first, !key.isEmpty,
        key.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f })
      else { throw .malformedPair(pair) }
      let name = String(key)
      guard result[name] == nil else { throw .duplicateKey(name) }
      var value = ""
      if parts.count == 2 {
        let encoded = String(parts[1])
        guard let data = Data(base64Encoded: encoded), data.base64EncodedString() == encoded else {
          throw .invalidBase64(key: name)
        }
        guard let text = String(data: data, encoding: .utf8) else { throw .notUTF8(key: name) }
        value = text
      }
      result[name] = value
    }
    return result
  }

  /// The header for `metadata`, keys sorted; an empty value is sent as the bare key.
  static func encode(_ metadata: [String: String]) -> String {
    metadata.keys.sorted().map { key in
      let value = metadata[key] ?? ""
      return value.isEmpty ? key : "\(key) \(Data(value.utf8).base64EncodedString())"
    }.joined(separator: ",")
  }
}
