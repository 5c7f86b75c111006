import Foundation

/// A JSON value, as found in a token's header and claims.
///
/// ```swift
/// let claims: [String: JSONValue] = ["admin": true, "groups": ["a", "b"], "level": 3]
/// claims["level"]?.numberValue   // 3.0
/// ```
/// Integers and fractions are kept apart (`.int` / `.double`) so `exp` and custom integer claims
/// reach the rules engine exactly as written.
public enum JSONValue: Sendable, Hashable {
  case null
  case bool(Bool)
  case int(Int64)
  case double(Double)
  case string(String)
  case array([JSONValue])
  case object([String: JSONValue])

  /// The string, when this is a string.
  public var stringValue: String? {
    if case .string(let s) = self { s } else { nil }
  }

  /// The number as a `Double`, when this is an integer or a fraction.
  public var numberValue: Double? {
    switch self {
    case .int(let i): Double(i)
    case .double(let d): d
    default: nil
    }
  }

  /// The object's members, when this is an object.
  public var objectValue: [String: JSONValue]? {
    if case .object(let o) = self { o } else { nil }
  }

  /// Parses a JSON document whose top level must be an object; nil for anything else, including
  /// nesting deeper than `maxDepth`, which is refused before decoding so a hostile token header
  /// cannot make the recursive decoder exhaust a thread's stack.
  public static func parseObject(_ bytes: [UInt8], maxDepth: Int = 32) -> [String: JSONValue]? {
    parse(bytes, maxDepth: maxDepth)?.objectValue
  }

  /// Parses one JSON value of any kind (`42`, `"x"`, `[1]`, `{}`); nil for anything else,
  /// including trailing text and nesting deeper than `maxDepth`.
  public static func parse(_ bytes: [UInt8], maxDepth: Int = 32) -> JSONValue? {
    guard nestingDepth(bytes) <= maxDepth else { return nil }
    return try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
  }

  /// The deepest bracket nesting outside string literals.
  static func nestingDepth(_ bytes: [UInt8]) -> Int {
    var depth = 0
    var deepest = 0
    var inString = false
    var escaped = false
    for byte in bytes {
      if inString {
        if escaped {
          escaped = false
        } else if byte == UInt8(ascii: "\\") {
          escaped = true
        } else if byte == UInt8(ascii: "\"") {
          inString = false
        }
        continue
      }
      switch byte {
      case UInt8(ascii: "\""): inString = true
      case UInt8(ascii: "["), UInt8(ascii: "{"):
        depth += 1
        deepest = max(deepest, depth)
      case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
      default: break
      }
    }
    return deepest
  }

  /// Compact JSON with sorted keys, so equal values always serialise to equal bytes.
  public static func serialize(_ object: [String: JSONValue]) -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    // Encoding a JSONValue cannot fail except for non-finite doubles, which are written as null.
    return Array((try? encoder.encode(object)) ?? Data("{}".utf8))
  }
}

extension JSONValue: Codable {
  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    if container.decodeNil() {
      self = .null
    } else if let b = try? container.decode(Bool.self) {
      self = .bool(b)
    } else if let i = try? container.decode(Int64.self) {
      self = .int(i)
    } else if let d = try? container.decode(Double.self) {
      self = .double(d)
    } else if let s = try? container.decode(String.self) {
      self = .string(s)
    } else if let a = try? container.decode([JSONValue].self) {
      self = .array(a)
    } else {
      self = .object(try container.decode([String: JSONValue].self))
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    switch self {
    case .null: try container.encodeNil()
    case .bool(let b): try container.encode(b)
    case .int(let i): try container.encode(i)
    case .double(let d):
      if d.isFinite { try container.encode(d) } else { try container.encodeNil() }
    case .string(let s): try container.encode(s)
    case .array(let a): try container.encode(a)
    case .object(let o): try container.encode(o)
    }
  }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
  ExpressibleByFloatLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral,
  ExpressibleByNilLiteral
{
  public init(stringLiteral value: String) { self = .string(value) }
  public init(integerLiteral value: Int64) { self = .int(value) }
  public init(booleanLiteral value: Bool) { self = .bool(value) }
  public init(floatLiteral value: Double) { self = .double(value) }
  public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
  public init(dictionaryLiteral elements: (String, JSONValue)...) {
    self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
  }
  public init(nilLiteral: ()) { self = .null }
}
