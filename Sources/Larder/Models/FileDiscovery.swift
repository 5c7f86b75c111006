import Foundation

/// Finds every ``File`` in a value's encoded form, with the property path where it sits.
///
/// It runs the value's own `encode(to:)` against an encoder that keeps nothing but `File`s: each
/// `encode<T: Encodable>` call checks `value as? File` before descending, so files are found in
/// optionals, arrays, dictionaries, nested structs, enums with associated values, and in any
/// hand-written `Encodable` conformance, exactly where `JSONEncoder` would write them.
/// ```swift
/// let found = try FileDiscovery.attachments(in: user)   // [("avatar", 0, "0191…"), ("album[0]", 1, …)]
/// ```
enum FileDiscovery {
  /// The files of `value` in discovery order, with `position` = that order.
  static func attachments<T: Encodable>(in value: T) throws -> [Attachment] {
    let sink = Sink()
    if let file = value as? File {
      sink.record(file, at: [])
    } else {
      try value.encode(to: DiscoveringEncoder(sink: sink, path: []))
    }
    return sink.found
  }

  /// One step of a property path.
  enum Step {
    case key(String)
    case index(Int)
  }

  static func render(_ path: [Step]) -> String {
    var out = ""
    for step in path {
      switch step {
      case .key(let name): out += out.isEmpty ? name : "." + name
      case .index(let i): out += "[\(i)]"
      }
    }
    return out
  }

  final class Sink {
    var found: [Attachment] = []
    func record(_ file: File, at path: [Step]) {
      found.append(Attachment(property: FileDiscovery.render(path), position: found.count, fileID: file.id))
    }

    /// Records `value` if it is a `File`, otherwise walks it.
    func visit<T: Encodable>(_ value: T, at path: [Step]) throws {
      if let file = value as? File {
        record(file, at: path)
      } else {
        try value.encode(to: DiscoveringEncoder(sink: self, path: path))
      }
    }
  }

  static func step(_ key: any CodingKey) -> Step {
    // Keyed containers over integer keys (dictionaries keyed by Int) still render as names.
    .key(key.stringValue)
  }
}

private struct SuperKey: CodingKey {
  var stringValue: String { "super" }
  var intValue: Int? { nil }
  init() {}
  init?(stringValue: String) {}
  init?(intValue: Int) { nil }
}

private struct DiscoveringEncoder: Encoder {
  let sink: FileDiscovery.Sink
  let path: [FileDiscovery.Step]
  var codingPath: [any CodingKey] { [] }
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
    KeyedEncodingContainer(KeyedDiscovery<Key>(sink: sink, path: path))
  }

  func unkeyedContainer() -> any UnkeyedEncodingContainer {
    UnkeyedDiscovery(sink: sink, path: path)
  }

  func singleValueContainer() -> any SingleValueEncodingContainer {
    SingleValueDiscovery(sink: sink, path: path)
  }
}

private struct KeyedDiscovery<Key: CodingKey>: KeyedEncodingContainerProtocol {
  let sink: FileDiscovery.Sink
  let path: [FileDiscovery.Step]
  var codingPath: [any CodingKey] { [] }

  mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
    try sink.visit(value, at: path + [FileDiscovery.step(key)])
  }
  mutating func encodeNil(forKey key: Key) throws {}
  mutating func encode(_ value: Bool, forKey key: Key) throws {}
  mutating func encode(_ value: String, forKey key: Key) throws {}
  mutating func encode(_ value: Double, forKey key: Key) throws {}
  mutating func encode(_ value: Float, forKey key: Key) throws {}
  mutating func encode(_ value: Int, forKey key: Key) throws {}
  mutating func encode(_ value: Int8, forKey key: Key) throws {}
  mutating func encode(_ value: Int16, forKey key: Key) throws {}
  mutating func encode(_ value: Int32, forKey key: Key) throws {}
  mutating func encode(_ value: Int64, forKey key: Key) throws {}
  mutating func encode(_ value: UInt, forKey key: Key) throws {}
  mutating func encode(_ value: UInt8, forKey key: Key) throws {}
  mutating func encode(_ value: UInt16, forKey key: Key) throws {}
  mutating func encode(_ value: UInt32, forKey key: Key) throws {}
  mutating func encode(_ value: UInt64, forKey key: Key) throws {}

  mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
    -> KeyedEncodingContainer<NestedKey>
  {
    KeyedEncodingContainer(KeyedDiscovery<NestedKey>(sink: sink, path: path + [FileDiscovery.step(key)]))
  }
  mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
    UnkeyedDiscovery(sink: sink, path: path + [FileDiscovery.step(key)])
  }
  mutating func superEncoder() -> any Encoder {
    DiscoveringEncoder(sink: sink, path: path + [FileDiscovery.step(SuperKey())])
  }
  mutating func superEncoder(forKey key: Key) -> any Encoder {
    DiscoveringEncoder(sink: sink, path: path + [FileDiscovery.step(key)])
  }
}

private struct UnkeyedDiscovery: UnkeyedEncodingContainer {
  let sink: FileDiscovery.Sink
  let path: [FileDiscovery.Step]
  var codingPath: [any CodingKey] { [] }
  private(set) var count = 0

  init(sink: FileDiscovery.Sink, path: [FileDiscovery.Step]) {
    self.sink = sink
    self.path = path
  }

  private mutating func next() -> [FileDiscovery.Step] {
    defer { count += 1 }
    return path + [.index(count)]
  }

  mutating func encode<T: Encodable>(_ value: T) throws { try sink.visit(value, at: next()) }
  mutating func encodeNil() throws { count += 1 }
  mutating func encode(_ value: Bool) throws { count += 1 }
  mutating func encode(_ value: String) throws { count += 1 }
  mutating func encode(_ value: Double) throws { count += 1 }
  mutating func encode(_ value: Float) throws { count += 1 }
  mutating func encode(_ value: Int) throws { count += 1 }
  mutating func encode(_ value: Int8) throws { count += 1 }
  mutating func encode(_ value: Int16) throws { count += 1 }
  mutating func encode(_ value: Int32) throws { count += 1 }
  mutating func encode(_ value: Int64) throws { count += 1 }
  mutating func encode(_ value: UInt) throws { count += 1 }
  mutating func encode(_ value: UInt8) throws { count += 1 }
  mutating func encode(_ value: UInt16) throws { count += 1 }
  mutating func encode(_ value: UInt32) throws { count += 1 }
  mutating func encode(_ value: UInt64) throws { count += 1 }

  mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
    -> KeyedEncodingContainer<NestedKey>
  {
    KeyedEncodingContainer(KeyedDiscovery<NestedKey>(sink: sink, path: next()))
  }
  mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
    UnkeyedDiscovery(sink: sink, path: next())
  }
  mutating func superEncoder() -> any Encoder {
    DiscoveringEncoder(sink: sink, path: next())
  }
}

private struct SingleValueDiscovery: SingleValueEncodingContainer {
  let sink: FileDiscovery.Sink
  let path: [FileDiscovery.Step]
  var codingPath: [any CodingKey] { [] }

  mutating func encode<T: Encodable>(_ value: T) throws { try sink.visit(value, at: path) }
  mutating func encodeNil() throws {}
  mutating func encode(_ value: Bool) throws {}
  mutating func encode(_ value: String) throws {}
  mutating func encode(_ value: Double) throws {}
  mutating func encode(_ value: Float) throws {}
  mutating func encode(_ value: Int) throws {}
  mutating func encode(_ value: Int8) throws {}
  mutating func encode(_ value: Int16) throws {}
  mutating func encode(_ value: Int32) throws {}
  mutating func encode(_ value: Int64) throws {}
  mutating func encode(_ value: UInt) throws {}
  mutating func encode(_ value: UInt8) throws {}
  mutating func encode(_ value: UInt16) throws {}
  mutating func encode(_ value: UInt32) throws {}
  mutating func encode(_ value: UInt64) throws {}
}
